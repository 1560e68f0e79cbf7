"""The host-memory guard and the weights preflight of `up`, on the real engine with the emulated vLLM.

The emulated load runs for a minute; mid-load the test writes a fake meminfo (COMPOSEGEN_MEMINFO) below the
floor, and the guard must stop the stack and exit 3 naming the node and the figures. The stop latency
(floor crossed -> container stopped, Docker's FinishedAt) is printed, not asserted (no timed assertions).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from tests.support.engine import force_remove, free_port, project_leftovers, tiny_profile
from tests.support.helpers import REPO, make_project, run_cli

pytestmark = pytest.mark.docker

REST = """\
  memory_guard: {{min_available: 8gb, unified: true}}
  volumes:
    - {{source: "{cache}", target: /root/.cache/huggingface}}
vllm:
  max-model-len: 8192
emulate:
  env:
    EMU_LOAD_SECONDS: "{load}"
"""


def meminfo(path: Path, available_gib: float) -> None:
    kb = int(available_gib * 2**20)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(
        f"MemTotal:       {128 * 2**20} kB\nMemFree:        {kb} kB\nMemAvailable:   {kb} kB\n"
    )
    tmp.replace(path)  # atomic: the guard never reads half a file


def complete_snapshot(cache: Path) -> None:
    snap = cache / "hub" / "models--org--tiny-model" / "snapshots" / ("d" * 40)
    snap.mkdir(parents=True)
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        (snap / name).write_text("{}")
    (snap / "model.safetensors").write_bytes(b"\0" * 4096)


def setup(tmp_path: Path, load: float, complete: bool) -> tuple[Path, str, Path]:
    import uuid

    name, cache = f"t-{uuid.uuid4().hex[:8]}", tmp_path / "hf"
    cache.mkdir()
    if complete:
        complete_snapshot(cache)
    text = tiny_profile(
        f"{name}-served", f"{{host: {free_port()}}}", rest=REST.format(cache=cache, load=load)
    )
    root = make_project(tmp_path / "proj", {name: text})
    assert run_cli("--root", str(root), "render", name).returncode == 0
    return root, name, tmp_path / "meminfo"


def container(project: str) -> dict | None:
    ids = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label=com.docker.compose.project={project}"],
        capture_output=True,
        text=True,
    ).stdout.split()
    if not ids:
        return None
    # compose may remove the container it just listed (a recreate): then there is none yet
    found = json.loads(
        subprocess.run(["docker", "inspect", ids[0]], capture_output=True, text=True).stdout or "[]"
    )
    return found[0] if found else None


def test_guard_stops_a_loading_stack_below_the_floor(tmp_path):
    root, name, fake = setup(tmp_path, load=60, complete=True)
    meminfo(fake, 20.0)
    project = f"composegen-{name}"
    env = {"COMPOSEGEN_MEMINFO": str(fake), "NO_COLOR": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "composegen", "--root", str(root), "up", name, "--emulate"],
        cwd=REPO,
        env={**__import__("os").environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while (c := container(project)) is None or not c["State"]["Running"]:
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "the stack never started"
            time.sleep(0.2)
        # complete weights: the engine stays off the Hub
        assert "HF_HUB_OFFLINE=1" in c["Config"]["Env"]
        time.sleep(1.0)  # well into the load (60 s), far from ready
        crossed = time.time()
        meminfo(fake, 4.0)
        _, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 3, stderr
        assert (
            "node this host: MemAvailable 4.0 GiB of 128.0 GiB fell below the memory guard's floor of 8.0 GiB"
            in (stderr)
        )
        assert "preflight ok   memory: MemAvailable 20.0 GiB" in stderr
        state = container(project)["State"]
        assert state["Running"] is False
        stopped = datetime.fromisoformat(
            state["FinishedAt"][:26].rstrip("Z") + "+00:00"
        ).timestamp()
        print(
            f"memory guard: container stopped {stopped - crossed:.2f} s after MemAvailable crossed the floor"
        )
    finally:
        if proc.poll() is None:
            proc.kill()
        force_remove(project)
    assert project_leftovers(project) == []


def test_preflight_refuses_below_the_floor_and_warns_on_incomplete_weights(tmp_path):
    root, name, fake = setup(tmp_path, load=1, complete=False)
    meminfo(fake, 6.5)
    project = f"composegen-{name}"
    try:
        res = run_cli(
            "--root", str(root), "up", name, "--emulate", env={"COMPOSEGEN_MEMINFO": str(fake)}
        )
        assert res.returncode == 3, res.stderr
        assert (
            "preflight FAIL memory: this host: MemAvailable 6.5 GiB of 128.0 GiB, below the floor of 8.0 GiB"
            in (res.stderr)
        )
        assert "preflight warn weights: org/tiny-model@dddddddddddd is incomplete" in res.stderr
        assert container(project) is None  # refused before anything started
    finally:
        force_remove(project)


def test_wait_is_guarded_too(tmp_path, monkeypatch):
    """`up --no-wait`, then the seam's attach (what `wait` calls): the watcher runs while it waits, and the same
    stop and exit-3 error follow."""
    import os
    import threading

    from composegen.profiles import resolve
    from composegen.project import find_project
    from composegen.stack import driver, memguard

    root, name, fake = setup(tmp_path, load=60, complete=False)
    meminfo(fake, 20.0)
    project = f"composegen-{name}"
    monkeypatch.setenv("COMPOSEGEN_MEMINFO", str(fake))
    try:
        res = run_cli(
            "--root", str(root), "up", name, "--emulate", "--no-wait", env=dict(os.environ)
        )
        assert res.returncode == 0, res.stderr
        # incomplete: the engine may download
        assert "HF_HUB_OFFLINE=1" not in container(project)["Config"]["Env"]
        proj = find_project(root)
        timer = threading.Timer(1.5, meminfo, (fake, 2.0))
        timer.start()
        with pytest.raises(
            memguard.MemoryLow, match=r"node this host: MemAvailable 2\.0 GiB"
        ) as caught:
            driver.attach(proj, resolve.load(proj, name))
        timer.join()
        assert caught.value.exit_code == 3
        assert container(project)["State"]["Running"] is False
    finally:
        force_remove(project)
