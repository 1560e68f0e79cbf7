"""The profile's `kubernetes:` section: checked like every field, outside the hash, and what the manifests use;
LWS for more than two nodes; long names still make valid object names."""

from __future__ import annotations

import json

import yaml

from composegen.k8s.manifests import k8s_name
from tests.k8s.conftest import validate
from tests.support import profiles as docs
from tests.support.caches import own
from tests.support.cli import run_cli


def _member(name: str, rank: int) -> dict:
    member = {
        "name": name,
        "rank": rank,
        "hf_cache": "/hf",
        "environment": {"VLLM_HOST_IP": f"10.0.0.{rank + 1}"},
    }
    return member if rank == 0 else {**member, "docker_host": f"ssh://{name}"}


TRIO = {
    **docs.BASE,
    "service": {**docs.BASE["service"], "ipc": "host"},
    "vllm": {**docs.BASE["vllm"], "distributed-executor-backend": "mp", "tensor-parallel-size": 3},
    "nodes": {"master_addr": "10.0.0.1", "members": [_member(n, i) for i, n in enumerate("abc")]},
}


def test_bad_kubernetes_settings_are_one_line_of_bad_input(tmp_path):
    root = docs.project(
        tmp_path, docs.edited((("kubernetes", "hf_cache"), {"claim": "Not_A_Name"}))
    )
    res = run_cli("--root", str(root), "render", "--target", "k8s")
    assert (
        res.returncode == 2
        and "profiles/p.yaml" in res.stderr
        and "kubernetes.hf_cache" in res.stderr
    )
    assert len(res.stderr.strip().splitlines()) == 1 and not (root / "out").exists()
    root = docs.project(
        tmp_path / "two",
        docs.edited((("kubernetes", "hf_cache"), {"claim": "a", "host_path": "/x"})),
    )
    assert run_cli("--root", str(root), "render", "--target", "k8s").returncode == 2


def test_kubernetes_settings_are_used_and_leave_the_compose_file_alone(tmp_path):
    plain = docs.project(tmp_path / "a", docs.BASE)
    chosen = docs.project(
        tmp_path / "b",
        docs.edited(
            (("kubernetes",), {"hf_cache": {"claim": "weights"}, "secret": "tokens"}),
            (("service", "environment"), {"HF_TOKEN": "${HF_TOKEN:?set it}"}),
            (
                ("service", "volumes"),
                [{"source": "${HF_HOME}", "target": "/root/.cache/huggingface"}],
            ),
        ),
    )
    for root in (plain, chosen):
        assert run_cli("--root", str(root), "render", "--target", "all").returncode == 0
    dep = yaml.safe_load((chosen / "out/p/k8s/deployment.yaml").read_text())
    spec = dep["spec"]["template"]["spec"]
    assert {"name": "hf-cache", "persistentVolumeClaim": {"claimName": "weights"}} in spec[
        "volumes"
    ]
    env = [e for e in spec["containers"][0]["env"] if own({e["name"]: 1})]
    assert env == [
        {
            "name": "HF_TOKEN",
            "valueFrom": {"secretKeyRef": {"name": "tokens", "key": "HF_TOKEN", "optional": False}},
        }
    ]
    validate(dep)
    hash_line = [
        (root / "out/p/compose.yaml").read_text().splitlines()[1] for root in (plain, chosen)
    ]
    assert hash_line[0].split("hash:")[0] == hash_line[1].split("hash:")[0]


def test_three_nodes_make_one_lws_group_and_name_what_one_worker_template_cannot_say(tmp_path):
    root = docs.project(tmp_path, TRIO)
    res = run_cli("--root", str(root), "render", "--target", "all", "--json")
    assert res.returncode == 0, res.stderr
    lws = yaml.safe_load((root / "out/p/k8s/leaderworkerset.yaml").read_text())
    assert lws["spec"]["leaderWorkerTemplate"]["size"] == 3
    validate(lws)
    (k8s,) = json.loads(res.stdout)["k8s"]
    assert "nodes.members.c.environment" in {n["setting"] for n in k8s["unmapped"]}
    diff = run_cli("--root", str(root), "diff", "p", "--targets", "compose,k8s", "--json")
    report = json.loads(diff.stdout)
    # rank 2's VLLM_HOST_IP cannot be said by the shared worker template: the diff says so, and fails
    assert diff.returncode == 1 and not report["equal"]
    assert [(f["node"], f["fact"]) for f in report["facts"] if not f["equal"]] == [
        ("c (rank 2)", "environment")
    ]


def test_long_profile_names_make_valid_object_names():
    name = k8s_name("a" * 63)
    assert len(name) <= 40 and name.startswith("composegen-") and name == k8s_name("a" * 63)
    assert k8s_name("my_profile") == "composegen-my-profile"
