"""Ctrl-C at any moment of a real `composegen up --emulate` (a subprocess sent SIGINT): exit 130, no
traceback, a message saying what was left and how to remove it, no probe container left behind, and
nothing labelled for the stack once `composegen down` ran."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import datetime

import pytest

from tests.support.engine import emulated_project, force_remove, project_leftovers
from tests.support.helpers import REPO, run_cli

pytestmark = pytest.mark.docker


def _start_up(root, name: str, *extra: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "composegen", "--root", str(root), "up", name, "--emulate", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "NO_COLOR": "1", **(env or {})},
    )


def _labelled(label: str) -> list[str]:
    res = subprocess.run(
        ["docker", "ps", "-a", "--filter", f"label={label}", "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr
    return res.stdout.split()


def _interrupt_when(proc: subprocess.Popen, ready, timeout: float = 120) -> tuple[int, str]:
    """SIGINT as soon as `ready()` holds (polled as fast as docker answers); the exit code and stderr."""
    deadline = time.monotonic() + timeout
    while not ready():
        assert proc.poll() is None, (
            f"up ended before the moment to interrupt: {proc.communicate()[1]}"
        )
        assert time.monotonic() < deadline, "the moment to interrupt never came"
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    return proc.returncode, stderr


def _assert_clean_exit(code: int, stderr: str, name: str) -> None:
    # 130, or ended by the SIGINT itself once it has spoken (a shell reports that as 130 too)
    assert code == 130 or (code == -signal.SIGINT and stderr.strip()), stderr
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    assert not _labelled(f"io.composegen.probe=composegen-{name}"), (
        "a probe container outlived the interrupted run"
    )


def _assert_down_leaves_nothing(root, name: str) -> None:
    res = run_cli("--root", str(root), "down", name)
    assert res.returncode == 0, res.stderr
    assert project_leftovers(f"composegen-{name}") == []
    assert not _labelled(f"io.composegen.probe=composegen-{name}")


@pytest.fixture
def project(tmp_path):
    root, name, _ = emulated_project(tmp_path, load=60)
    yield root, name
    force_remove(f"composegen-{name}")
    subprocess.run(
        f"docker rm -f $(docker ps -aq --filter label=io.composegen.probe=composegen-{name}) 2>/dev/null",
        shell=True,
        capture_output=True,
    )


def test_ctrl_c_while_a_preflight_probe_runs_removes_the_probe_and_starts_nothing(project):
    root, name = project
    # the cold path: the rlimit probe runs
    proc = _start_up(root, name, env={"COMPOSEGEN_NO_CACHE": "1"})
    code, stderr = _interrupt_when(
        proc, lambda: bool(_labelled(f"io.composegen.probe=composegen-{name}"))
    )
    _assert_clean_exit(code, stderr, name)
    assert f"interrupted during preflight of {name}" in stderr
    assert (
        "nothing of it is left on the engine" in stderr
        and f"composegen up {name} --emulate" in stderr
    )
    assert project_leftovers(f"composegen-{name}") == []


def test_ctrl_c_during_compose_up_says_what_it_left_and_down_removes_it(project):
    root, name = project
    proc = _start_up(root, name)
    code, stderr = _interrupt_when(proc, lambda: bool(project_leftovers(f"composegen-{name}")))
    _assert_clean_exit(code, stderr, name)
    if "stopped waiting" not in stderr:  # compose may have finished just before the signal landed
        assert f"interrupted while starting {name}; " in stderr, stderr
        left = project_leftovers(f"composegen-{name}")
        assert ("left: " in stderr) == bool(left), stderr
        assert all(thing in stderr for thing in left), stderr  # each leftover is named
        if left:
            assert (
                f"composegen down {name}" in stderr and f"composegen up {name} --emulate" in stderr
            )
    _assert_down_leaves_nothing(root, name)


@pytest.mark.parametrize("delay", [0.3, 0.78, 1.5, 3.0])
def test_ctrl_c_at_any_moment_leaks_nothing_down_does_not_remove(project, delay):
    root, name = project
    proc = _start_up(root, name)
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    _assert_clean_exit(proc.returncode, stderr, name)
    lines = stderr.strip().splitlines()
    # before `up` began (modules, the profile): nothing started
    if lines == ["composegen: interrupted"]:
        assert project_leftovers(f"composegen-{name}") == []
    else:  # a run that began says what it left and how to remove it or start again
        assert lines[-1].startswith("hint: ") or "this run started nothing" in stderr, stderr
    _assert_down_leaves_nothing(root, name)


def test_ctrl_c_while_waiting_keeps_the_stack_and_says_how_to_stop_it(project):
    root, name = project
    proc = _start_up(root, name)
    # `compose up` returned long ago
    code, stderr = _interrupt_when(proc, lambda: _running_for(name) > 2.0)
    _assert_clean_exit(code, stderr, name)
    assert f"stopped waiting for {name}; the stack keeps running" in stderr
    assert f"composegen down {name}" in stderr
    assert _states(name) == ["running"]  # Ctrl-C stops waiting only
    _assert_down_leaves_nothing(root, name)


def _running_for(name: str) -> float:
    """Seconds the stack's container has been running (0 before it runs), by Docker's own clock."""
    res = subprocess.run(
        ["docker", "ps", "-q", "--filter", f"label=com.docker.compose.project=composegen-{name}"],
        capture_output=True,
        text=True,
    )
    if not res.stdout.split():
        return 0.0
    started = subprocess.run(
        ["docker", "inspect", "-f", "{{.State.StartedAt}}", *res.stdout.split()],
        capture_output=True,
        text=True,
    ).stdout.split()
    return (
        time.time() - datetime.fromisoformat(started[0][:26].rstrip("Z") + "+00:00").timestamp()
        if started
        else 0.0
    )


def _states(name: str) -> list[str]:
    res = subprocess.run(
        [
            "docker",
            "ps",
            "-a",
            "--filter",
            f"label=com.docker.compose.project=composegen-{name}",
            "--format",
            "{{.State}}",
        ],
        capture_output=True,
        text=True,
    )
    return res.stdout.split()


@pytest.mark.parametrize("signum,code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_sigterm_or_sighup_while_waiting_say_what_was_left_as_ctrl_c_does(project, signum, code):
    root, name = project
    proc = _start_up(root, name)
    deadline = time.monotonic() + 120
    while _running_for(name) <= 2.0:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1]
    proc.send_signal(signum)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == code, stderr
    assert (
        f"{signal.Signals(signum).name}: stopped waiting for {name}; the stack keeps running"
        in stderr
    )
    assert f"composegen down {name}" in stderr and "Traceback" not in stderr
    _assert_down_leaves_nothing(root, name)


def test_sigterm_during_compose_up_says_what_it_left(project):
    root, name = project
    proc = _start_up(root, name)
    deadline = time.monotonic() + 120
    while not _states(name):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1]
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, stderr
    assert "SIGTERM: " in stderr and (
        "left:" in stderr or "keeps running" in stderr or "nothing of it" in stderr
    )
    assert "Traceback" not in stderr
    _assert_down_leaves_nothing(root, name)
