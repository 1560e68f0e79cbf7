"""The driver on the real engine with the emulated vLLM: up, status, startup, logs, down, and faults."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.support.cli import run_cli
from tests.support.engine import emulated_project, force_remove, project_leftovers
from tests.support.helpers import REPO

pytestmark = pytest.mark.docker


@pytest.fixture
def stacks():
    started: list[str] = []
    yield started
    for project in started:
        force_remove(project)


# compose project composegen-4096-131k on its fixed port 39071
@pytest.mark.xdist_group("shipped-stacks")
def test_shipped_candidate_comes_up_emulated_and_goes_away(stacks):
    project = "composegen-4096-131k"
    stacks.append(project)
    res = run_cli("up", "4096-131k", "--emulate", "--json", timeout=600)
    assert res.returncode == 0, res.stderr
    up = json.loads(res.stdout)
    assert up["emulated"] is True
    # the rest are the engine's stages
    readiness = [p["phase"] for p in up["phases"] if p["stage"] is None]
    assert readiness == ["created", "running", "port open", "health 200", "models ready"]
    assert {"weights", "kv_cache", "ready"} <= {p["stage"] for p in up["phases"]}
    assert up["startup"]["max_model_len"] == 131072
    assert up["startup"]["mismatches"] == []
    assert up["detection_latency_s"] is not None and up["detection_latency_s"] < 0.5
    with urllib.request.urlopen("http://127.0.0.1:39071/v1/models", timeout=5) as resp:
        model = json.load(resp)["data"][0]
    assert model["id"] == "deepseek-v4-flash-r33-b4096-131k" and model["max_model_len"] == 131072
    logs = run_cli("logs", "4096-131k", "--tail", "all").stdout
    # the engine's own line
    assert f"GPU KV cache size: {up['startup']['kv_cache_tokens']:,} tokens" in logs
    assert "Available KV cache memory" in logs
    status = json.loads(run_cli("status", "4096-131k", "--json").stdout)["stacks"][0]
    assert status["drift"]["state"] == "in-sync" and status["endpoint"]["max_model_len"] == 131072
    assert status["containers"][0]["state"] == "running"
    start = json.loads(run_cli("startup", "4096-131k", "--json").stdout)
    assert start["ready"] is True and start["kv_cache_gib_min"] == pytest.approx(15.99)
    down = run_cli("down", "4096-131k", "--json")
    assert down.returncode == 0, down.stderr
    assert project_leftovers(project) == []


def test_crash_during_load_fails_fast_with_exit_code_and_logs(tmp_path, stacks):
    root, name, _ = emulated_project(tmp_path, env={"EMU_FAULT": "crash_during_load"})
    stacks.append(f"composegen-{name}")
    started = time.monotonic()
    res = run_cli("--root", str(root), "up", name, "--emulate", "--down-on-failure")
    assert res.returncode == 3, res.stderr
    assert time.monotonic() - started < 60
    assert "exited with code 1" in res.stderr and "last 80 log lines" in res.stderr
    assert project_leftovers(f"composegen-{name}") == []


def test_never_ready_times_out(tmp_path, stacks):
    root, name, _ = emulated_project(tmp_path, env={"EMU_FAULT": "never_ready"})
    stacks.append(f"composegen-{name}")
    res = run_cli(
        "--root", str(root), "up", name, "--emulate", "--timeout", "6", "--down-on-failure"
    )
    assert res.returncode == 3 and "not ready after 6 s (waiting for: port open)" in res.stderr
    assert project_leftovers(f"composegen-{name}") == []


def test_port_in_use_is_refused_before_anything_starts(tmp_path, stacks):
    root, name, port = emulated_project(tmp_path)
    stacks.append(f"composegen-{name}")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
        sock.listen()
        res = run_cli("--root", str(root), "up", name, "--emulate")
    assert res.returncode == 3 and f"host port 127.0.0.1:{port} is already in use" in res.stderr
    assert project_leftovers(f"composegen-{name}") == []


def test_missing_image_is_a_clear_engine_failure(tmp_path, stacks):
    root, name, _ = emulated_project(tmp_path)
    stacks.append(f"composegen-{name}")
    res = run_cli("--root", str(root), "up", name)
    assert res.returncode == 3
    assert "could not be pulled" in res.stderr and "no nvidia runtime" in res.stderr
    assert project_leftovers(f"composegen-{name}") == []


def test_engine_unreachable(tmp_path):
    root, name, _ = emulated_project(tmp_path)
    res = run_cli(
        "--root",
        str(root),
        "up",
        name,
        "--emulate",
        env={"DOCKER_HOST": "unix:///nonexistent.sock"},
    )
    assert (
        res.returncode == 3
        and "Docker engine at unix:///nonexistent.sock (DOCKER_HOST) unreachable" in res.stderr
    )
    assert "Traceback" not in res.stderr


def test_misspelled_flag_past_the_validator_exits_2_like_vllm(tmp_path, stacks):
    """Hand the container a flag the profile validator would have refused: the emulator fails like vLLM."""
    from composegen.profiles import resolve as profile
    from composegen.project import Project
    from composegen.stack import emulate, engine, hostprobe, placement

    root, name, _ = emulated_project(tmp_path)
    stacks.append(f"composegen-{name}")
    project = Project(root)
    r = profile.load(project, name)
    compose = project.out_path(name)
    compose.write_text(
        compose.read_text().replace(
            '"--max-num-batched-tokens=4096"', '"--max-num-batched-tokenz=4096"'
        )
    )
    image = engine.build_emulator_image()
    ulimits, _ = emulate.clamp_ulimits(
        {"memlock": -1, "nofile": 1048576}, hostprobe.engine_rlimits(image, name)
    )
    emulate.write_override(project, r, image, ulimits)
    dep = placement.deployment(project, r)
    st = dep.stack(dep.head, emulated=True)
    st.up()
    ctr = placement.vllm_container(engine.project_containers(st.project))
    assert ctr is not None
    assert engine.client(ctr.target).api.wait(ctr.id, timeout=60).get("StatusCode") == 2
    assert (
        "vllm serve: error: unrecognized arguments: --max-num-batched-tokenz=4096"
        in engine.logs(ctr)
    )
    st.down(timeout=1)
    assert project_leftovers(st.project) == []


def test_ctrl_c_while_waiting_leaves_the_stack_and_says_how_to_stop_it(tmp_path, stacks):
    root, name, _ = emulated_project(tmp_path, load=60)
    stacks.append(f"composegen-{name}")
    proc = subprocess.Popen(
        [sys.executable, "-m", "composegen", "--root", str(root), "up", name, "--emulate"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "NO_COLOR": "1"},
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not project_leftovers(f"composegen-{name}"):
        time.sleep(0.5)
    time.sleep(2)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert f"composegen down {name}" in stderr
    assert project_leftovers(f"composegen-{name}")  # still there: Ctrl-C stops waiting only
    assert run_cli("--root", str(root), "down", name).returncode == 0
    assert project_leftovers(f"composegen-{name}") == []


def test_health_503_after_ready_shows_in_status(tmp_path, stacks):
    root, name, _ = emulated_project(
        tmp_path, env={"EMU_FAULT": "health_503_after", "EMU_FAULT_AFTER_S": "1"}
    )
    stacks.append(f"composegen-{name}")
    assert run_cli("--root", str(root), "up", name, "--emulate").returncode == 0
    time.sleep(2)
    status = json.loads(run_cli("--root", str(root), "status", name, "--json").stdout)["stacks"][0]
    assert status["endpoint"]["healthy"] is False
    assert run_cli("--root", str(root), "down", name).returncode == 0


def test_kv_too_small_fails_with_the_engines_own_estimate(tmp_path, stacks):
    """The emulated memory model leaves ~0.1 GiB of KV: fewer tokens than max-model-len 8192."""
    root, name, _ = emulated_project(tmp_path, env={"EMU_WEIGHTS_GIB": "86.17"})
    stacks.append(f"composegen-{name}")
    res = run_cli("--root", str(root), "up", name, "--emulate", "--down-on-failure")
    assert res.returncode == 3, res.stderr
    assert "exited with code 1" in res.stderr
    assert (
        "recognised kv_too_small_for_max_len: Lower --max-model-len to what fits (at most"
        in res.stderr
    )
    assert project_leftovers(f"composegen-{name}") == []


def test_status_reports_drift_and_which_side_is_newer(tmp_path, stacks):
    root, name, _ = emulated_project(tmp_path)
    stacks.append(f"composegen-{name}")
    assert run_cli("--root", str(root), "up", name, "--emulate").returncode == 0
    path = root / "profiles" / f"{name}.yaml"
    path.write_text(path.read_text().replace("max-num-seqs: 1", "max-num-seqs: 2"))
    assert run_cli("--root", str(root), "render", name).returncode == 0
    drift = json.loads(run_cli("--root", str(root), "status", name, "--json").stdout)["stacks"][0][
        "drift"
    ]
    assert (
        drift["state"] == "drifted" and drift["newer"] == "out" and drift["running"] != drift["out"]
    )
    text = run_cli("--root", str(root), "status", name).stdout
    assert "drifted (out is newer)" in text
    stale = run_cli("--root", str(root), "evidence", name)
    assert (
        stale.returncode == 1
        and "evidence would describe a configuration that is not running" in stale.stderr
    )
    assert run_cli("--root", str(root), "down", name).returncode == 0
