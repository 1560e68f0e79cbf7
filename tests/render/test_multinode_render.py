"""Multi-node profiles: one compose file per node, validation of the node set, the shipped dspark-2x."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml

from composegen import render
from composegen.profiles import resolve as profile
from composegen.project import Project
from tests.support.cli import run_cli
from tests.support.helpers import REPO, make_project

TWO_NODES = """\
image: example/vllm@sha256:{digest}
model: {{id: org/model, revision: {rev}, served_name: pair}}
service:
  port: {{host: 39990}}
  container_name: pair
  gpus: {{count: 1}}
  ipc: host
  shm_size: 8gb
  environment: {{SHARED: "1", NCCL_DEBUG: INFO}}
  volumes:
    - {{source: "${{HF_HOME:-~/.cache/huggingface}}", target: /root/.cache/huggingface}}
    - {{source: pair-cache, target: /cache}}
vllm:
  tensor-parallel-size: 2
  max-model-len: 4096
  max-num-batched-tokens: 2048
  max-num-seqs: 2
nodes:
  master_addr: 10.0.0.1
  master_port: 29511
  rdma: true
  members:
    - name: head
      rank: 0
      environment: {{VLLM_HOST_IP: 10.0.0.1, NCCL_DEBUG: WARN}}
      hf_cache: /data/hf
    - name: w1
      rank: 1
      docker_host: unix:///run/w1.sock
      environment: {{VLLM_HOST_IP: 10.0.0.2}}
      gpus: {{device_ids: ["3"]}}
""".format(digest="a" * 64, rev="b" * 40)


def _docs(root, name="pair") -> dict:
    rendered = render.render_all(Project(root), [name])
    return {
        key: yaml.safe_load(text)["services"]["vllm"] | {"_name": yaml.safe_load(text)["name"]}
        for key, text in rendered.items()
    }


def test_one_file_per_node_with_vllm_multi_node_flags(tmp_path):
    root = make_project(tmp_path, {"pair": TWO_NODES})
    docs = _docs(root)
    assert list(docs) == ["pair/head", "pair/w1"]
    head, worker = docs["pair/head"], docs["pair/w1"]
    for svc in (head, worker):
        assert svc["network_mode"] == "host" and "ports" not in svc
        assert {
            "--nnodes=2",
            "--master-addr=10.0.0.1",
            "--master-port=29511",
            "--tensor-parallel-size=2",
        } <= set(svc["command"])
        assert svc["devices"] == ["/dev/infiniband:/dev/infiniband"] and svc["cap_add"] == [
            "IPC_LOCK"
        ]
        assert svc["environment"]["SHARED"] == "1"
    assert "--node-rank=0" in head["command"] and "--headless" not in head["command"]
    assert "--node-rank=1" in worker["command"] and "--headless" in worker["command"]
    # Host network: vLLM listens on the host's address and port, and the probe follows it.
    assert {"--host=127.0.0.1", "--port=39990"} <= set(head["command"])
    assert "http://127.0.0.1:39990/health" in head["healthcheck"]["test"][-1]
    assert worker["healthcheck"] == {"disable": True}
    assert (
        head["environment"]["NCCL_DEBUG"] == "WARN"
        and worker["environment"]["NCCL_DEBUG"] == "INFO"
    )
    assert (
        head["environment"]["VLLM_HOST_IP"] == "10.0.0.1"
        and worker["environment"]["VLLM_HOST_IP"] == "10.0.0.2"
    )
    assert head["volumes"] == [
        "/data/hf:/root/.cache/huggingface",
        "pair-cache:/cache",
        "composegen-cache:/composegen-cache",  # each node its own host's volume of the one key
    ]
    assert worker["volumes"][0] == "${HF_HOME:-~/.cache/huggingface}:/root/.cache/huggingface"
    assert worker["deploy"]["resources"]["reservations"]["devices"][0]["device_ids"] == ["3"]
    assert head["deploy"]["resources"]["reservations"]["devices"][0]["count"] == 1
    assert (head["_name"], worker["_name"]) == ("composegen-pair-head", "composegen-pair-w1")
    assert (head["container_name"], worker["container_name"]) == ("pair-head", "pair-w1")
    assert (
        head["labels"]["io.composegen.node"] == "head"
        and worker["labels"]["io.composegen.node-rank"] == "1"
    )
    assert head["labels"]["io.composegen.hash"] == worker["labels"]["io.composegen.hash"]


def test_render_writes_node_files_and_check_sees_stale_and_orphans_at_both_depths(tmp_path):
    root = make_project(tmp_path, {"pair": TWO_NODES})
    assert run_cli("--root", str(root), "render").returncode == 0
    assert sorted(p.relative_to(root).as_posix() for p in (root / "out").rglob("compose.yaml")) == [
        "out/pair/head/compose.yaml",
        "out/pair/w1/compose.yaml",
    ]
    assert run_cli("--root", str(root), "render", "--check").returncode == 0
    worker = root / "out/pair/w1/compose.yaml"
    worker.write_text(worker.read_text().replace('"--node-rank=1"', '"--node-rank=2"'))
    (root / "out/pair/ghost").mkdir()
    (root / "out/pair/ghost/compose.yaml").write_text("name: x\n")
    # what a single-node render of `pair` would leave
    (root / "out/pair/compose.yaml").write_text("name: y\n")
    res = run_cli("--root", str(root), "render", "--check", "--json")
    assert res.returncode == 1
    assert sorted(
        (d["path"], d["reason"]) for d in __import__("json").loads(res.stdout)["drift"]
    ) == [
        ("out/pair/compose.yaml", "orphan"),
        ("out/pair/ghost/compose.yaml", "orphan"),
        ("out/pair/w1/compose.yaml", "stale"),
    ]


def _bad(tmp_path, old: str, new: str) -> str:
    text = TWO_NODES.replace(old, new)
    assert text != TWO_NODES, old
    res = run_cli("--root", str(make_project(tmp_path, {"pair": text})), "validate")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1
    return res.stderr.strip()


@pytest.mark.parametrize(
    "old, new, message",
    [
        (
            "rank: 1\n",
            "rank: 0\n",
            "profiles/pair.yaml:22: nodes.members: node ranks must be 0..1, each once; got [0, 0]",
        ),
        (
            "rank: 1\n",
            "rank: 2\n",
            "profiles/pair.yaml:22: nodes.members: node ranks must be 0..1, each once; got [0, 2]",
        ),
        (
            "name: w1",
            "name: head",
            "profiles/pair.yaml:22: nodes.members: node names must be unique; got ['head', 'head']",
        ),
        (
            "tensor-parallel-size: 2",
            "tensor-parallel-size: 4",
            "profiles/pair.yaml:14: vllm.tensor-parallel-size: tensor × pipeline parallel = 4, but 2 nodes × 1"
            " GPU(s) = 2",
        ),
        (
            'gpus: {device_ids: ["3"]}',
            "gpus: {count: 2}",
            "profiles/pair.yaml:22: nodes.members: every node must reserve the same number of GPUs; got [1, 2]",
        ),
        (
            "master_addr: 10.0.0.1",
            "master_addr: 10.0.0.256",
            "profiles/pair.yaml:19: nodes.master_addr: not an IPv4 address: '10.0.0.256'",
        ),
        (
            "master_addr: 10.0.0.1",
            "master_addr: 0.0.0.0",
            "profiles/pair.yaml:19: nodes.master_addr: 0.0.0.0 is the wildcard address; workers need the head's"
            " own address on the fabric",
        ),
        (
            "master_addr: 10.0.0.1",
            'master_addr: "spark 1"',
            "profiles/pair.yaml:19: nodes.master_addr: not an IP address or host name: 'spark 1'",
        ),
        (
            "master_port: 29511",
            "master_port: 70000",
            "profiles/pair.yaml:20: nodes.master_port: Input should be less than or equal to 65535, got 70000",
        ),
        (
            "master_port: 29511",
            "master_port: 39990",
            "profiles/pair.yaml:20: nodes.master_port: 39990 is also the API port (service.port.host); the head"
            " listens on both",
        ),
        (
            "max-num-seqs: 2",
            "max-num-seqs: 2\n  distributed-executor-backend: ray",
            "profiles/pair.yaml:18: vllm.distributed-executor-backend: multi-node nodes: needs the mp backend"
            " (vLLM's --nnodes launch), got 'ray'",
        ),
        (
            "max-num-seqs: 2",
            "max-num-seqs: 2\n  nnodes: 2",
            "profiles/pair.yaml:18: vllm.nnodes: set by composegen from nodes.members",
        ),
        (
            "VLLM_HOST_IP: 10.0.0.2}",
            "VLLM_HOST_IP: 10.0.0.2, HF_TOKEN: hf_abc}",
            "nodes.members.1.environment: HF_TOKEN: secrets must be a ${VAR} reference",
        ),
        (
            "docker_host: unix:///run/w1.sock",
            "docker_host: spark-2",
            "nodes.members.1.docker_host: String should match pattern",
        ),
    ],
)
def test_bad_node_sets_are_one_line_errors(tmp_path, old, new, message):
    assert message in _bad(tmp_path, old, new)


def test_unpinned_image_needs_a_reason_and_fails_strict(tmp_path):
    tagged = TWO_NODES.replace(
        "image: example/vllm@sha256:" + "a" * 64, "image: local/vllm:built-here"
    )
    root = make_project(tmp_path, {"pair": tagged})
    res = run_cli("--root", str(root), "validate")
    assert (
        res.returncode == 2
        and "profiles/pair.yaml:1: image: 'local/vllm:built-here' is not pinned" in res.stderr
    )
    (root / "profiles/pair.yaml").write_text(tagged + "image_unpinned_reason: built on each node\n")
    assert run_cli("--root", str(root), "validate").returncode == 0
    res = run_cli("--root", str(root), "validate", "--strict")
    assert res.returncode == 1 and "unpinned image in pair" in res.stderr


def test_remote_node_with_client_side_volume_path_warns(tmp_path):
    text = TWO_NODES.replace("docker_host: unix:///run/w1.sock", "docker_host: ssh://spark-2")
    r = profile.load(Project(make_project(tmp_path, {"pair": text})), "pair")
    assert any(
        "node w1: volume source '${HF_HOME:-~/.cache/huggingface}' is resolved on this machine" in w
        for w in r.warnings
    )
    r = profile.load(Project(make_project(tmp_path / "local", {"pair": TWO_NODES})), "pair")
    # a unix socket is this machine
    assert not any("resolved on this machine" in w for w in r.warnings)


def test_shipped_dspark_2x_is_the_seed_recipe_on_two_nodes():
    project = Project(REPO)
    r = profile.load(project, "dspark-2x")
    rendered = render.render_stack(r)
    assert list(rendered) == ["dspark-2x/spark-1", "dspark-2x/spark-2"]
    for key, text in rendered.items():
        assert project.out_path(key).read_text(encoding="utf-8") == text, f"out/{key} is stale"
    f = r.flags
    assert (
        f["tensor-parallel-size"],
        f["distributed-executor-backend"],
        f["kv-cache-dtype"],
        f["max-model-len"],
    ) == (
        2,
        "mp",
        "nvfp4_ds_mla",
        1048576,
    )
    assert (
        f["max-num-batched-tokens"],
        f["long-prefill-token-threshold"],
        f["max-num-seqs"],
        f["gpu-memory-utilization"],
    ) == (8192, 1024, 6, 0.835)
    assert (
        "speculative-config" not in f and not r.profile.pinned and r.profile.image_unpinned_reason
    )
    assert (r.profile.model.revision, r.profile.nodes.rdma) == (
        "9e165c30e2704aec5d9d593cce3eebd58bbef1cb",
        True,
    )
    worker = yaml.safe_load(rendered["dspark-2x/spark-2"])["services"]["vllm"]
    assert "--headless" in worker["command"] and worker["environment"]["NCCL_IB_HCA"]
    assert run_cli("validate", "dspark-2x").returncode == 0
    # image_policy: local-build, reviewed
    assert run_cli("validate", "--strict", "dspark-2x").returncode == 0


@pytest.mark.skipif(shutil.which("docker") is None, reason="no compose binary")
def test_every_node_file_passes_compose_config(tmp_path):
    root = make_project(tmp_path, {"pair": TWO_NODES})
    assert run_cli("--root", str(root), "render").returncode == 0
    files = sorted((root / "out").rglob("compose.yaml")) + sorted(
        (REPO / "out/dspark-2x").rglob("compose.yaml")
    )
    assert len(files) == 4
    for path in files:
        res = subprocess.run(
            ["docker", "compose", "-f", str(path), "config", "-q"], capture_output=True, text=True
        )
        assert res.returncode == 0, f"{path}: {res.stderr}"
