"""Two `up` of one profile at once are serialized (a lock per profile), and a run never removes a stack
it did not start — on the real engine with the emulated vLLM."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import pytest

from tests.support.engine import emulated_project, force_remove, project_leftovers
from tests.support.helpers import REPO, run_cli

pytestmark = pytest.mark.docker


def _popen(root, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "composegen", "--root", str(root), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "NO_COLOR": "1"},
    )


def _container_ids(project: str) -> list[str]:
    res = subprocess.run(
        [
            "docker",
            "ps",
            "-aq",
            "--no-trunc",
            "--filter",
            f"label=com.docker.compose.project={project}",
        ],
        capture_output=True,
        text=True,
    )
    return res.stdout.split()


def _running_for(project: str) -> float:
    """Seconds the project's container has been running (0 before it runs), by Docker's own clock."""
    ids = _container_ids(project)
    res = subprocess.run(
        ["docker", "inspect", "-f", "{{.State.Running}} {{.State.StartedAt}}", *ids],
        capture_output=True,
        text=True,
    )
    fields = res.stdout.split()
    if len(fields) < 2 or fields[0] != "true":
        return 0.0
    return time.time() - datetime.fromisoformat(fields[1][:26].rstrip("Z") + "+00:00").timestamp()


def test_two_ups_of_one_profile_are_serialized_and_the_loser_leaves_the_winner_alone(tmp_path):
    root, name, _ = emulated_project(tmp_path, load=2)
    project = f"composegen-{name}"
    try:
        first, second = _popen(root, "up", name, "--emulate"), _popen(root, "up", name, "--emulate")
        outcomes = sorted(
            (p.wait(timeout=300), p.communicate()[1])
            for p in (first, second)
            # one starts it; the other finds it running and ready, and prints its summary (0, issue 16)
        )
        assert [code for code, _ in outcomes] == [0, 0], outcomes
        errs = [err for _, err in outcomes]
        assert sum(f"{name} is already running and ready" in err for err in errs) == 1, errs
        assert "Traceback" not in "".join(errs)
        status = json.loads(run_cli("--root", str(root), "status", name, "--json").stdout)[
            "stacks"
        ][0]
        assert [c["state"] for c in status["containers"]] == ["running"] and status["endpoint"][
            "healthy"
        ] is True
        assert run_cli("--root", str(root), "down", name).returncode == 0
        assert project_leftovers(project) == []
    finally:
        force_remove(project)


def _lock_is_held(path: Path) -> bool:
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # releases it if this probe took it
    return False


def test_the_lock_holder_is_named_while_another_run_waits(tmp_path):
    root, name, _ = emulated_project(tmp_path, load=3)
    project, lock = f"composegen-{name}", root / ".composegen" / "locks" / f"{name}.lock"
    holder = _popen(root, "up", name, "--emulate")
    try:
        deadline = time.monotonic() + 120
        # the holder has the lock
        while not (lock.is_file() and lock.read_text().strip() == str(holder.pid)):
            assert holder.poll() is None and time.monotonic() < deadline, holder.communicate()[1]
            time.sleep(0.05)
        # Stopped, the holder keeps the lock for as long as the waiter needs to start on a busy machine.
        holder.send_signal(signal.SIGSTOP)
        assert _lock_is_held(lock)
        waiter = _popen(root, "up", name, "--emulate")
        said: list[str] = []
        reader = threading.Thread(target=lambda: said.extend(waiter.stderr), daemon=True)
        reader.start()
        while not any("waiting for another composegen run" in line for line in said):
            assert waiter.poll() is None and time.monotonic() < deadline + 120, "".join(said)
            time.sleep(0.05)
        holder.send_signal(signal.SIGCONT)
        assert waiter.wait(timeout=300) == 0, "".join(said)
        reader.join(timeout=30)
        assert holder.wait(timeout=300) == 0
        waiter_err = "".join(said)
        assert f"waiting for another composegen run of {name} (pid {holder.pid})" in waiter_err
        assert f"{name} is already running and ready" in waiter_err  # its summary
    finally:
        holder.send_signal(signal.SIGCONT)  # a no-op once it has exited
        force_remove(project)


def test_down_on_failure_never_removes_a_stack_this_run_did_not_start(tmp_path):
    """The stack is recreated under a waiting `up --down-on-failure` by someone else (`docker compose up
    --force-recreate`: a new container replaces the run's own): the run fails, and leaves the new one running."""
    root, name, _ = emulated_project(tmp_path, load=60)
    project = f"composegen-{name}"
    try:
        run = _popen(root, "up", name, "--emulate", "--down-on-failure", "--timeout", "120")
        deadline = time.monotonic() + 120
        # the run is waiting by now: it has recorded its container
        while _running_for(project) < 2.0:
            assert run.poll() is None and time.monotonic() < deadline, run.communicate()[1]
            time.sleep(0.1)
        ids = _container_ids(project)
        files = ["-f", str(root / "out" / name / "compose.yaml")]
        files += ["-f", str(root / ".composegen" / name / "emulate.override.yaml")]
        replaced = subprocess.run(
            ["docker", "compose", "-p", project, *files, "up", "-d", "--force-recreate"],
            capture_output=True,
            text=True,
        )
        assert replaced.returncode == 0, replaced.stderr
        _, stderr = run.communicate(timeout=120)
        assert run.returncode == 3, stderr
        assert "not removed: " in stderr and "(not started by this run)" in stderr, stderr
        others = _container_ids(project)
        assert others and set(others).isdisjoint(ids)
        state = subprocess.run(
            ["docker", "inspect", "-f", "{{.State.Status}}", *others],
            capture_output=True,
            text=True,
        )
        assert state.stdout.split() == ["running"]
    finally:
        force_remove(project)
