"""`render --target k8s`: the same argv, GPUs, shm, image and environment as the compose stack; LWS for
`nodes:`; secrets by reference; every compose setting without an equivalent named; drift-checked."""

from __future__ import annotations

import json
import subprocess
import sys

import yaml

from composegen import render
from composegen.k8s import expansion, output, weights_init
from composegen.profiles import resolve as profiles
from composegen.project import Project
from composegen.weights import snapshot
from tests.support import profiles as docs
from tests.support.cli import run_cli
from tests.support.helpers import REPO


def _k8s(name: str, root=REPO) -> dict[str, dict]:
    files, _ = output.render_profile(profiles.load(Project(root), name))
    return {key.rsplit("/", 1)[-1]: yaml.safe_load(text) for key, text in files.items()}


def _compose(key: str) -> dict:
    r = profiles.load(Project(REPO), key.split("/")[0])
    return yaml.safe_load(render.render_stack(r)[key])["services"]["vllm"]


def _unescaped(words: list[str]) -> list[str]:
    return [w.replace("$$", "$") for w in words]


def test_dspark_leader_and_worker_argv_equal_the_compose_nodes_argv():
    r = profiles.load(Project(REPO), "dspark-2x")
    lws = _k8s("dspark-2x")["leaderworkerset.yaml"]
    assert lws["apiVersion"] == "leaderworkerset.x-k8s.io/v1" and lws["kind"] == "LeaderWorkerSet"
    lwt = lws["spec"]["leaderWorkerTemplate"]
    assert lwt["size"] == 2
    for rank, (node, role) in enumerate(
        [("spark-1", "leaderTemplate"), ("spark-2", "workerTemplate")]
    ):
        compose = _compose(f"dspark-2x/{node}")
        container = lwt[role]["spec"]["containers"][0]
        # What LWS injects into this pod, with the leader's address standing for the fabric address.
        env = {
            "LWS_GROUP_SIZE": "2",
            "LWS_WORKER_INDEX": str(rank),
            "LWS_LEADER_ADDRESS": r.profile.nodes.master_addr,
        }
        argv = [expansion.expand(w, env) for w in container["command"] + container["args"]]
        assert argv == _unescaped(compose["entrypoint"] + compose["command"]), node
        refs = [w for w in container["args"] if "$(" in w]
        assert refs == [
            "--master-addr=$(LWS_LEADER_ADDRESS)",
            "--nnodes=$(LWS_GROUP_SIZE)",
            "--node-rank=$(LWS_WORKER_INDEX)",
        ]
        assert ("--headless" in container["args"]) == (rank == 1)
        assert container["resources"]["limits"] == {"nvidia.com/gpu": 1}
        assert container["image"] == compose["image"]
        spec = lwt[role]["spec"]
        # the compose nodes have both
        assert spec["hostNetwork"] is True and spec["hostIPC"] is True
        assert spec["dnsPolicy"] == "ClusterFirstWithHostNet"
        assert container["securityContext"] == {"capabilities": {"add": ["IPC_LOCK"]}}
        assert ("startupProbe" in container) == (rank == 0)  # a headless worker serves no HTTP
    service = _k8s("dspark-2x")["service.yaml"]
    assert service["spec"]["selector"]["app.kubernetes.io/component"] == "leader"


def test_single_node_deployment_matches_compose():
    k = _k8s("4096-131k")
    compose = _compose("4096-131k")
    dep = k["deployment.yaml"]
    spec = dep["spec"]["template"]["spec"]
    c = spec["containers"][0]
    assert dep["spec"]["replicas"] == 1 and dep["spec"]["strategy"] == {"type": "Recreate"}
    assert c["command"] + c["args"] == _unescaped(compose["entrypoint"] + compose["command"])
    assert c["image"] == compose["image"] and "@sha256:" in c["image"]
    assert c["resources"]["limits"] == {"nvidia.com/gpu": 2}
    shm = next(v for v in spec["volumes"] if v["name"] == "dshm")
    assert shm == {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "32Gi"}}
    assert {"name": "dshm", "mountPath": "/dev/shm"} in c["volumeMounts"]
    start = c["startupProbe"]
    assert (
        start["httpGet"]["path"] == "/health"
        and c["readinessProbe"]["httpGet"]["path"] == "/health"
    )
    assert start["periodSeconds"] * start["failureThreshold"] >= 1800
    assert spec["terminationGracePeriodSeconds"] == 120
    assert "hostNetwork" not in spec  # the compose stack has its own network
    env = {e["name"]: e for e in c["env"]}
    assert env["HF_TOKEN"] == {
        "name": "HF_TOKEN",
        "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "HF_TOKEN", "optional": True}},
    }
    literal = {k: v["value"] for k, v in env.items() if "value" in v}
    assert literal == {k: v for k, v in compose["environment"].items() if k != "HF_TOKEN"}
    init = spec["initContainers"][0]
    assert init["command"][:2] == ["python3", "-c"]
    assert init["command"][3].endswith("/snapshots/9e165c30e2704aec5d9d593cce3eebd58bbef1cb")
    assert init["volumeMounts"] == [
        {"name": "hf-cache", "mountPath": "/root/.cache/huggingface", "readOnly": True}
    ]
    hf = next(v for v in spec["volumes"] if v["name"] == "hf-cache")
    assert hf == {"name": "hf-cache", "persistentVolumeClaim": {"claimName": "hf-cache"}}


def test_secret_values_never_reach_the_manifests(tmp_path):
    root = docs.project(
        tmp_path, docs.edited((("service", "environment"), {"HF_TOKEN": "${HF_TOKEN}"}))
    )
    res = run_cli(
        "--root", str(root), "render", "--target", "k8s", env={"HF_TOKEN": "hf_sekrit_value_123"}
    )
    assert res.returncode == 0, res.stderr
    text = "".join(p.read_text() for p in (root / "out/p/k8s").iterdir())
    assert "hf_sekrit_value_123" not in text + res.stdout + res.stderr
    assert "secretKeyRef" in text


def test_security_fields_only_when_the_compose_stack_has_them(tmp_path):
    root = docs.project(tmp_path, docs.BASE)  # ipc private, no host network, no capabilities
    assert run_cli("--root", str(root), "render", "--target", "all").returncode == 0
    text = (root / "out/p/k8s/deployment.yaml").read_text()
    for word in ("hostIPC", "hostNetwork", "privileged", "capabilities", "hostPath", "hostPID"):
        assert word not in text, word
    compose = (root / "out/p/compose.yaml").read_text()
    assert 'ipc: "private"' in compose


def test_a_single_pod_gets_no_host_ipc_for_compose_ipc_host(tmp_path):
    """compose's `ipc: host` is there for /dev/shm reclaim across containers; a pod's /dev/shm is its own
    memory emptyDir, so the shipped single-node profiles (ipc: host) render without hostIPC (issue 40)."""
    res = run_cli("--root", str(REPO), "render", "r33", "--target", "k8s", "--json", "--check")
    assert res.returncode == 0, res.stderr
    text = (REPO / "out/r33/k8s/deployment.yaml").read_text()
    assert "hostIPC" not in text.split("apiVersion:", 1)[1]
    assert "#   ipc: host -> no hostIPC: the pod's /dev/shm is the memory emptyDir dshm" in text
    assert 'medium: "Memory"' in text


def test_render_json_lists_what_kubernetes_cannot_say(tmp_path):
    root = tmp_path
    for p in (REPO / "profiles").glob("*.yaml"):
        (root / "profiles").mkdir(exist_ok=True)
        (root / "profiles" / p.name).write_text(p.read_text())
    res = run_cli("--root", str(root), "render", "dspark-2x", "--target", "k8s", "--json")
    assert res.returncode == 0, res.stderr
    (k8s,) = json.loads(res.stdout)["k8s"]
    assert k8s["kind"] == "LeaderWorkerSet"
    unmapped = {n["setting"] for n in k8s["unmapped"]}
    assert {"ulimits.memlock", "ulimits.stack", "container_name", "init", "devices"} <= unmapped
    security = {n["k8s"].split(":")[0].split(" ")[0] for n in k8s["security"]}
    assert security == {"hostIPC", "hostNetwork", "securityContext.capabilities.add", "hostPath"}
    header = (root / "out/dspark-2x/k8s/leaderworkerset.yaml").read_text().split("apiVersion:")[0]
    for n in k8s["unmapped"] + k8s["security"]:
        assert f"#   {n['setting']}: {n['value']} -> {n['k8s']}" in header


def test_dollar_text_stays_literal_through_kubernetes_expansion(tmp_path):
    doc = docs.edited((("service", "environment"), {"ODD": "a$(HOME)b$$c"}))
    doc["model"]["served_name"] = "x$(HOME)"
    root = docs.project(tmp_path, doc)
    assert run_cli("--root", str(root), "render", "--target", "k8s").returncode == 0, "render"
    c = yaml.safe_load((root / "out/p/k8s/deployment.yaml").read_text())["spec"]["template"][
        "spec"
    ]["containers"][0]
    env = {e["name"]: e["value"] for e in c["env"]}
    assert expansion.expand(env["ODD"], {"HOME": "/root"}) == "a$(HOME)b$$c"
    assert "x$(HOME)" in [expansion.expand(w, {"HOME": "/root"}) for w in c["args"]]


def test_default_render_keeps_rendered_k8s_fresh_and_check_sees_drift(tmp_path):
    root = docs.project(tmp_path, docs.BASE)
    assert run_cli("--root", str(root), "render").returncode == 0
    assert not (root / "out/p/k8s").exists()  # nobody asked for Kubernetes here
    assert run_cli("--root", str(root), "render", "--target", "k8s").returncode == 0
    path = root / "profiles/p.yaml"
    path.write_text(path.read_text().replace("max-num-seqs: 4", "max-num-seqs: 5"))
    res = run_cli("--root", str(root), "render", "--check")
    assert (
        res.returncode == 1
        and "out/p/k8s/deployment.yaml" in res.stdout
        and "--max-num-seqs=5" in res.stdout
    )
    assert run_cli("--root", str(root), "render").returncode == 0
    assert run_cli("--root", str(root), "render", "--check").returncode == 0
    assert "--max-num-seqs=5" in (root / "out/p/k8s/deployment.yaml").read_text()
    stale = root / "out/p/k8s/leaderworkerset.yaml"
    stale.write_text("# Generated by composegen from nowhere\n")
    res = run_cli("--root", str(root), "render", "--check")
    assert res.returncode == 1 and "out/p/k8s/leaderworkerset.yaml" in res.stdout
    assert run_cli("--root", str(root), "render").returncode == 0 and not stale.exists()
    path.rename(root / "profiles/q.yaml")  # p is gone: its generated files go with it
    assert run_cli("--root", str(root), "render").returncode == 0
    assert not (root / "out/p").exists() and not (root / "out/q/k8s").exists()


def test_rendering_is_deterministic():
    r = profiles.load(Project(REPO), "dspark-2x")
    assert output.render_profile(r)[0] == output.render_profile(r)[0]


def _snapshot(tmp_path, shards=("model-00001.safetensors", "model-00002.safetensors")):
    snap = tmp_path / "snap"
    snap.mkdir(parents=True)
    for name in ("config.json", "tokenizer_config.json", "tokenizer.json", *shards):
        (snap / name).write_text("{}")
    index = {
        "weight_map": {
            f"w{i}": s for i, s in enumerate(("model-00001.safetensors", "model-00002.safetensors"))
        }
    }
    (snap / snapshot.INDEX).write_text(json.dumps(index))
    return snap


def _init_check(path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-I", "-c", weights_init.script(), str(path)],
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_init_container_check_judges_as_composegen_weights_does(tmp_path):
    complete = _snapshot(tmp_path / "a")
    res = _init_check(complete)
    assert res.returncode == 0 and "complete (6 files)" in res.stdout
    assert snapshot.judge(snapshot.list_local(str(complete), None)).complete
    partial = _snapshot(tmp_path / "b", shards=("model-00001.safetensors",))
    res = _init_check(partial)
    judged = snapshot.judge(snapshot.list_local(str(partial), None))
    assert res.returncode == 1 and judged.missing == ["model-00002.safetensors"]
    assert "missing: model-00002.safetensors" in res.stdout
    assert _init_check(tmp_path / "nowhere").returncode == 1


def test_fixture_profile_matches_golden_files(tmp_path):
    from tests.support.helpers import MINIMAL, make_project

    root = make_project(tmp_path, {"tiny": MINIMAL})
    assert run_cli("--root", str(root), "render", "--target", "k8s").returncode == 0
    golden = REPO / "tests/data/golden"
    for name in ("deployment.yaml", "service.yaml", "kustomization.yaml", "cache-pvc.yaml"):
        assert (root / "out/tiny/k8s" / name).read_text() == (
            golden / f"tiny.k8s.{name}"
        ).read_text(), name
