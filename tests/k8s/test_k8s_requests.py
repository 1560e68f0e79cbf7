"""What a pod asks the scheduler for (resources.requests from the profile) and the cache claim the
kustomization carries: `kubectl kustomize` of every shipped out/*/k8s builds, and every claim a
workload mounts is in the build or one the profile says exists already."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml

from tests.k8s.conftest import validate
from tests.support import profiles as docs
from tests.support.cli import run_cli
from tests.support.helpers import REPO


def _container(workload: dict) -> dict:
    spec = workload["spec"]
    pod = spec.get("template") or spec["leaderWorkerTemplate"]["leaderTemplate"]
    return pod["spec"]["containers"][0]


@pytest.mark.parametrize(
    ("profile", "gpus", "shm_gib", "offload_gib"),
    [("4096-131k", 2, 32, 0), ("393k-offload", 2, 32, 16), ("dspark-2x", 1, 64, 0)],
)
def test_the_shipped_pods_request_their_shm_offload_and_engine_memory(
    profile, gpus, shm_gib, offload_gib
):
    (path,) = [
        p
        for p in (REPO / "out" / profile / "k8s").glob("*.yaml")
        if p.stem != "kustomization" and p.stem in ("deployment", "leaderworkerset")
    ]
    requests = _container(yaml.safe_load(path.read_text()))["resources"]["requests"]
    # the memory emptyDir on /dev/shm is charged to the pod: the node must hold it
    assert requests == {"cpu": str(gpus + 1), "memory": f"{shm_gib + offload_gib + 8}Gi"}


def test_the_profile_sets_the_requests_and_the_claim_it_wants(tmp_path):
    root = docs.project(
        tmp_path,
        docs.edited(
            (
                ("kubernetes",),
                {
                    "requests": {"cpu": "500m", "memory": "100gb"},
                    "hf_cache": {"claim": "weights", "size": "2tb"},
                },
            ),
            (
                ("service", "volumes"),
                [{"source": "${HF_HOME}", "target": "/root/.cache/huggingface"}],
            ),
        ),
    )
    res = run_cli("--root", str(root), "render", "--target", "k8s")
    assert res.returncode == 0, res.stderr
    k8s = root / "out/p/k8s"
    dep = yaml.safe_load((k8s / "deployment.yaml").read_text())
    assert _container(dep)["resources"]["requests"] == {"cpu": "500m", "memory": "100Gi"}
    claim = yaml.safe_load((k8s / "pvc.yaml").read_text())
    assert claim["metadata"]["name"] == "weights"
    assert claim["spec"] == {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "2Ti"}},
    }
    validate(dep)
    validate(claim)
    assert "pvc.yaml" in yaml.safe_load((k8s / "kustomization.yaml").read_text())["resources"]


def test_a_claim_named_without_a_size_exists_already_and_is_not_rendered(tmp_path):
    root = docs.project(
        tmp_path,
        docs.edited(
            (("kubernetes",), {"hf_cache": {"claim": "weights"}}),
            (
                ("service", "volumes"),
                [{"source": "${HF_HOME}", "target": "/root/.cache/huggingface"}],
            ),
        ),
    )
    assert run_cli("--root", str(root), "render", "--target", "k8s").returncode == 0
    assert not (root / "out/p/k8s/pvc.yaml").exists()
    bad = docs.project(
        tmp_path / "bad",
        docs.edited((("kubernetes", "hf_cache"), {"host_path": "/x", "size": "1tb"})),
    )
    res = run_cli("--root", str(bad), "render", "--target", "k8s")
    assert res.returncode == 2 and "kubernetes.hf_cache" in res.stderr, res.stderr


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on this machine")
@pytest.mark.parametrize("k8s", sorted((REPO / "out").glob("*/k8s")), ids=lambda p: p.parent.name)
def test_kubectl_kustomize_builds_every_shipped_stack_with_the_claims_it_mounts(k8s):
    built = subprocess.run(
        ["kubectl", "kustomize", str(k8s)], capture_output=True, text=True, timeout=60
    )
    assert built.returncode == 0, built.stderr
    docs_ = list(yaml.safe_load_all(built.stdout))
    claims = {d["metadata"]["name"] for d in docs_ if d["kind"] == "PersistentVolumeClaim"}
    workload = next(d for d in docs_ if d["kind"] in ("Deployment", "LeaderWorkerSet"))
    spec = workload["spec"]
    pod = spec.get("template") or spec["leaderWorkerTemplate"]["leaderTemplate"]
    mounted = {
        v["persistentVolumeClaim"]["claimName"]
        for v in pod["spec"]["volumes"]
        if "persistentVolumeClaim" in v
    }
    # the shipped profiles name no claim of their own: what they mount, the build carries
    assert mounted <= claims, (mounted, claims)
