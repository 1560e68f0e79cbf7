"""Multi-node stacks on two real Docker engines on one machine (the main one and a second dockerd), with the
emulated vLLM: up (workers first, head ready only once every rank joined), status on both nodes, a killed
worker detected and named, down leaving nothing on either engine, the head's filled cache given to a worker
whose engine has none, and an unreachable node reported by name."""

from __future__ import annotations

import json
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.engine import free_port, tiny_profile
from tests.support.helpers import REPO, make_project
from tests.support.second_engine import (  # noqa: F401 - the session fixture
    BASE_IMAGE,
    force_remove,
    leftovers,
    second_engine,
)

pytestmark = pytest.mark.docker

REST = """\
  ulimits: {{memlock: -1, nofile: 1048576}}
vllm:
  tensor-parallel-size: 2
  distributed-executor-backend: mp
  max-model-len: 8192
  max-num-batched-tokens: 4096
  max-num-seqs: 1
nodes:
  master_addr: 127.0.0.1
  master_port: {master}
  rdma: true
  members:
    - {{name: n0, rank: 0{head_where}}}
    - {{name: n1, rank: 1{worker_where}, environment: {{NODE_NOTE: worker}}}}
emulate:
  env:
    EMU_LOAD_SECONDS: "{load}"
"""


@pytest.fixture
def two_node(tmp_path, second_engine):  # noqa: F811 - pytest injects the imported fixture
    made: list[tuple[Path, str]] = []

    def make(
        load: float = 1.0, worker_host: str | None = None, head_context: str | None = None
    ) -> tuple:
        """Head n0 on the local engine (or on the second engine through a docker context), worker n1 on the
        second engine (or on `worker_host`, or locally when the head took the second engine)."""
        name = f"mn-{uuid.uuid4().hex[:8]}"
        worker = "" if head_context else f', docker_host: "{worker_host or second_engine.url}"'
        port = f"{{host: {free_port()}, bind: {'0.0.0.0' if head_context else '127.0.0.1'}}}"
        rest = REST.format(
            master=free_port(),
            load=load,
            worker_where=worker,
            head_where=f', context: "{head_context}"' if head_context else "",
        )
        # a cache key of its own (the image digest is keyed): tiny_profile's is other tests' too
        text = tiny_profile(f"{name}-served", port, rest=rest).replace(
            "c" * 64, secrets.token_hex(32)
        )
        root = make_project(tmp_path / name, {name: text})
        res = run_cli("--root", str(root), "render", name)
        assert res.returncode == 0, res.stderr
        made.append((root, name))
        return root, name

    yield make
    from composegen.profiles import caches, resolve
    from composegen.project import Project

    for root, name in made:
        for project in (f"composegen-{name}-n0", f"composegen-{name}-n1"):
            force_remove(project)
            force_remove(project, second_engine.url)
        volume = caches.volume(resolve.load(Project(root), name), emulated=True) or ""
        subprocess.run(["docker", "volume", "rm", volume], capture_output=True)  # the head's
        second_engine.docker("volume", "rm", volume, check=False)  # the worker's


def _container(name: str, host: str | None = None) -> dict:
    res = subprocess.run(
        ["docker", *(["-H", host] if host else []), "inspect", name], capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)[0]


def _wait_exited(name: str, host: str | None = None, timeout: float = 30) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = _container(name, host)["State"]
        if state["Status"] in ("exited", "dead"):
            return state
        time.sleep(0.2)
    raise AssertionError(f"{name} still running after {timeout} s")


def _files(volume: str, host: str | None = None) -> dict[str, str]:
    """Each file of VOLUME on one engine, by its sha256."""
    walk = (
        "import hashlib, os\nfor d, _, fs in os.walk('/c'):\n for f in fs:\n"
        "  p = os.path.join(d, f); print(p, hashlib.sha256(open(p, 'rb').read()).hexdigest())"
    )
    mount = ["-v", f"{volume}:/c:ro", "--entrypoint", "python3", BASE_IMAGE, "-c", walk]
    res = subprocess.run(
        ["docker", *(["-H", host] if host else []), "run", "--rm", *mount],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr
    return dict(line.split() for line in res.stdout.splitlines())


def test_two_engines_up_status_killed_worker_and_down(two_node, second_engine):  # noqa: F811
    root, name = two_node()
    res = run_cli("--root", str(root), "up", name, "--emulate", "--json", timeout=600)
    assert res.returncode == 0, res.stderr
    up = json.loads(res.stdout)
    assert [(n["name"], n["rank"], n["role"]) for n in up["nodes"]] == [
        ("n0", 0, "head"),
        ("n1", 1, "worker"),
    ]
    assert up["nodes"][1]["engine"] == second_engine.url
    # the rest are the engine's stages
    readiness = [p["phase"] for p in up["phases"] if p["stage"] is None]
    assert readiness[-1] == "models ready" and up["startup"]["ready"] is True
    assert {c["name"] for c in up["checks"]} >= {
        "n0/engine",
        "n1/engine",
        "n0/image",
        "n1/image",
        "image-digest",
        "n0/port",
    }
    with urllib.request.urlopen(up["endpoint"] + "/v1/models", timeout=5) as resp:
        assert json.load(resp)["data"][0]["id"] == f"{name}-served"

    head, worker = f"composegen-{name}-n0-vllm-1", f"composegen-{name}-n1-vllm-1"
    head_log = run_cli("--root", str(root), "logs", name).stdout
    assert "All 2 nodes joined" in head_log and "Node rank 1 joined" in head_log
    worker_log = second_engine.docker("logs", worker).stdout
    assert "Joined the master at 127.0.0.1" in worker_log and "Node rank 1 is ready" in worker_log

    status = json.loads(run_cli("--root", str(root), "status", name, "--json").stdout)["stacks"][0]
    assert [(n["name"], n["reachable"]) for n in status["nodes"]] == [("n0", True), ("n1", True)]
    assert [(c["node"], c["name"], c["state"]) for c in status["containers"]] == [
        ("n0", head, "running"),
        ("n1", worker, "running"),
    ]
    assert status["endpoint"]["healthy"] is True and status["drift"]["state"] == "in-sync"
    assert run_cli("--root", str(root), "status", name).returncode == 0

    # The worker's engine out of reach while the head serves: `status NAME` exits 3 naming the node.
    path = root / "profiles" / f"{name}.yaml"
    text = path.read_text()
    path.write_text(text.replace(second_engine.url, "unix:///nonexistent/composegen-status.sock"))
    lost = run_cli("--root", str(root), "status", name)
    assert lost.returncode == 3, lost.stdout + lost.stderr
    assert (
        "node n1 (unix:///nonexistent/composegen-status.sock) unreachable"
        in lost.stderr.splitlines()[0]
    )
    assert "n0 (rank 0)" in lost.stdout  # the table still shows what runs
    path.write_text(text)

    second_engine.docker("kill", worker)
    head_state = _wait_exited(head)
    assert head_state["ExitCode"] == 1
    head_log = run_cli("--root", str(root), "logs", name).stdout
    assert "Worker proc Worker_TP1 on node rank 1" in head_log and "died unexpectedly" in head_log
    status = json.loads(run_cli("--root", str(root), "status", name, "--json").stdout)["stacks"][0]
    states = {c["node"]: (c["state"], c["exit_code"]) for c in status["containers"]}
    assert states == {"n0": ("exited", 1), "n1": ("exited", 137)}
    assert "n1 (rank 1)" in run_cli("--root", str(root), "status", name).stdout

    res = run_cli("--root", str(root), "down", name, "--json")
    assert res.returncode == 0, res.stderr
    down = json.loads(res.stdout)
    assert sorted(down["removed"]) == sorted([head, worker])
    assert (
        leftovers(f"composegen-{name}-n0") == []
        and leftovers(f"composegen-{name}-n1", second_engine.url) == []
    )
    assert not (root / ".composegen" / name / "n1" / "emulate.override.yaml").exists()
    _head_cache_goes_to_a_worker_without_one(root, name, second_engine)


def _head_cache_goes_to_a_worker_without_one(root: Path, name: str, second_engine) -> None:  # noqa: F811
    """The first `up` filled the head's (emulated) cache volume; the worker's engine loses its own: the
    next `up` copies the head's there (export, import) before the worker starts, and says so."""
    from composegen.profiles import caches
    from composegen.profiles import resolve as profile
    from composegen.project import Project

    volume = caches.volume(profile.load(Project(root), name), emulated=True) or ""
    second_engine.docker("volume", "rm", volume)
    res = run_cli("--root", str(root), "up", name, "--emulate", "--json", timeout=600)
    assert res.returncode == 0, res.stderr
    up = json.loads(res.stdout)
    said = [(c["status"], c["message"]) for c in up["checks"] if c["name"] == "n1/cache"]
    key = volume.removeprefix(caches.VOLUME_PREFIX)
    assert len(said) == 1 and said[0][0] == "ok", said
    assert said[0][1].startswith(f"node n1 gets the head's cache {key} (")
    assert _files(volume, second_engine.url) == _files(volume) != {}
    assert up["startup"]["cache"] == "warm"  # the head's, as the parser reads its log
    assert run_cli("--root", str(root), "down", name).returncode == 0
    # the worker has it now: nothing is copied again
    res = run_cli("--root", str(root), "up", name, "--emulate", "--no-wait", "--json", timeout=600)
    assert res.returncode == 0, res.stderr
    assert not [c for c in json.loads(res.stdout)["checks"] if c["name"].endswith("/cache")]
    assert run_cli("--root", str(root), "down", name).returncode == 0


def test_worker_killed_while_loading_fails_up_naming_the_worker(two_node, second_engine):  # noqa: F811
    root, name = two_node(load=30)
    worker = f"composegen-{name}-n1-vllm-1"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "composegen",
            "--root",
            str(root),
            "up",
            name,
            "--emulate",
            "--down-on-failure",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    deadline = time.monotonic() + 300
    while (
        time.monotonic() < deadline
        and "Joined the master" not in second_engine.docker("logs", worker, check=False).stdout
    ):
        time.sleep(0.3)
    second_engine.docker("kill", worker)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 3, stderr
    assert (
        f"node n1 (rank 1, worker, {second_engine.url})" in stderr
        and "exited with code 137" in stderr
    )
    assert "--- node n1: last 80 log lines ---" in stderr and "Joined the master" in stderr
    assert "Traceback" not in stderr
    assert (
        leftovers(f"composegen-{name}-n0") == []
        and leftovers(f"composegen-{name}-n1", second_engine.url) == []
    )


def test_unreachable_node_is_reported_by_name_never_skipped(two_node):
    root, name = two_node(worker_host="unix:///nonexistent/composegen-test.sock")
    res = run_cli("--root", str(root), "up", name, "--emulate")
    assert res.returncode == 3 and "n1/engine" in res.stderr and "unreachable" in res.stderr, (
        res.stderr
    )
    assert leftovers(f"composegen-{name}-n0") == []  # nothing started anywhere

    status = json.loads(run_cli("--root", str(root), "status", name, "--json").stdout)["stacks"][0]
    n1 = next(n for n in status["nodes"] if n["name"] == "n1")
    assert n1["reachable"] is False and "unreachable" in n1["error"]
    assert {"node": "n1", "state": "unreachable"}.items() <= next(
        c for c in status["containers"] if c["node"] == "n1"
    ).items()
    text = run_cli("--root", str(root), "status", name).stdout
    assert "node n1 (unix:///nonexistent/composegen-test.sock) unreachable" in text

    res = run_cli("--root", str(root), "down", name)
    assert (
        res.returncode == 3
        and "node n1 (rank 1, worker" in res.stderr
        and "Traceback" not in res.stderr
    )


def test_a_node_named_by_docker_context_is_checked_through_a_probe_container(
    two_node,
    second_engine,  # noqa: F811 - pytest injects the imported fixture
    tmp_path,
    monkeypatch,
):
    """A context counts as a remote host: its ports and /dev/shm are looked at from a container on that host."""
    config = tmp_path / "docker-config"
    config.mkdir()
    plugins = Path.home() / ".docker" / "cli-plugins"
    if plugins.is_dir():
        # keep `docker compose` with a private DOCKER_CONFIG
        (config / "cli-plugins").symlink_to(plugins)
    monkeypatch.setenv("DOCKER_CONFIG", str(config))
    context = f"cg-{uuid.uuid4().hex[:8]}"
    subprocess.run(
        ["docker", "context", "create", context, "--docker", f"host={second_engine.url}"],
        check=True,
        capture_output=True,
    )
    root, name = two_node(head_context=context)
    master = int(
        next(
            line
            for line in (root / "profiles" / f"{name}.yaml").read_text().splitlines()
            if "master_port" in line
        ).split()[-1]
    )
    # the second engine shares this host's network: its probe must see this
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", master))
        busy.listen()
        res = run_cli(
            "--root", str(root), "up", name, "--emulate", env={"DOCKER_CONFIG": str(config)}
        )
    assert res.returncode == 3, res.stderr
    assert (
        f"n0/port: master port 0.0.0.0:{master} is already in use on context {context}"
        in res.stderr
    )
    assert leftovers(f"composegen-{name}-n0", second_engine.url) == []

    res = run_cli(
        "--root",
        str(root),
        "up",
        name,
        "--emulate",
        "--json",
        env={"DOCKER_CONFIG": str(config)},
        timeout=600,
    )
    assert res.returncode == 0, res.stderr
    up = json.loads(res.stdout)
    assert up["nodes"][0]["engine"] == f"context {context}" and up["endpoint"].startswith(
        "http://127.0.0.1:"
    )
    assert any(c["name"] == "n0/shm" for c in up["checks"])
    assert second_engine.docker(
        "ps", "--filter", f"label=com.docker.compose.project=composegen-{name}-n0", "-q"
    ).stdout.strip()

    from composegen.profiles import resolve as profile
    from composegen.project import Project
    from composegen.stack import driver

    report, text = driver.shm_report(profile.load(Project(root), name))
    head, worker = report.nodes
    assert (
        head.local is False
        and head.probe is not None
        and head.probe.free_bytes > 0
        and head.scan is None
    )
    assert worker.local is True and worker.scan is not None and worker.scan.path == "/dev/shm"
    assert "named like leftovers (holders not checked remotely)" in text

    res = run_cli("--root", str(root), "down", name, env={"DOCKER_CONFIG": str(config)})
    assert res.returncode == 0, res.stderr
    assert (
        leftovers(f"composegen-{name}-n0", second_engine.url) == []
        and leftovers(f"composegen-{name}-n1") == []
    )
