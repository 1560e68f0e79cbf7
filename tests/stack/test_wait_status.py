"""A stack that is still loading, on the real engine: `status` shows its stage (never "unhealthy"), the
commands that need a ready engine say "still loading" (exit 3, hint `wait`), a second `up` follows it to
ready as `wait` does (exit 0); then `up` on the ready stack prints its summary, with the time to ready its
engine logged (not when this command looked), and exits 0. After a Ctrl-C, the hint names `wait`."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest

from tests.support.engine import emulated_project, load_held

pytestmark = pytest.mark.docker

# Longer than `up --no-wait` takes to return: the checks that must see the load then run with it held
# (load_held: its emulator stopped), so they never race its end however busy the machine is.
LOAD_S = 12.0
# the profile's startup_timeout: the checks run inside it even at a load average of 15
START_PERIOD_S = 900


def _cli(root, *argv: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "composegen", "--root", str(root), *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_a_loading_stack_is_loading_everywhere_and_wait_follows_it_to_ready(tmp_path):
    root, name, _ = emulated_project(
        tmp_path, load=LOAD_S, timeout=START_PERIOD_S, env={"EMU_WEIGHT_SHARDS": "4"}
    )
    try:
        started = _cli(root, "up", name, "--emulate", "--no-wait")
        assert started.returncode == 0, started.stderr
        held_from = time.monotonic()
        with load_held(f"composegen-{name}-vllm-1"):
            status = json.loads(_cli(root, "status", name, "--json").stdout)["stacks"][0]
            loading = status["endpoint"]["loading"]
            assert status["endpoint"]["healthy"] is False and status["endpoint"]["ready"] is False
            assert (
                loading["in_start_period"]
                and loading["failed"] is None
                and loading["stage"] != "ready"
            )
            text = _cli(root, "status", name).stdout
            assert "loading: " in text and "unhealthy" not in text

            gate = _cli(root, "gate", name)
            assert gate.returncode == 3, gate.stderr
            assert (
                f"{name} is still loading: " in gate.stderr
                and f"composegen wait {name}" in gate.stderr
            )

            # a second `up` of a loading stack follows it, as wait does: it has said so before the load goes on
            again = subprocess.Popen(
                [sys.executable, "-m", "composegen", "--root", str(root), "up", name, "--emulate"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            said_lines: list[str] = []
            reader = threading.Thread(target=lambda: said_lines.extend(again.stderr), daemon=True)
            reader.start()
            deadline = time.monotonic() + 120
            while not any("is already starting: " in line for line in said_lines):
                assert again.poll() is None and time.monotonic() < deadline, "".join(said_lines)
                time.sleep(0.05)
        held_s = time.monotonic() - held_from
        again_out = again.stdout.read()  # until it exits
        again.wait(timeout=180)
        reader.join(timeout=30)
        again_err = "".join(said_lines)
        assert again.returncode == 0, again_err
        assert f"{name} is already starting: " in again_err
        assert f"following it as `composegen wait {name}` does" in again_err
        assert f"{name} is ready at http://127.0.0.1:" in again_out
        said = [line.split("] ", 1)[1].rstrip("\n") for line in said_lines if line.startswith("[")]
        assert said[-1] == "ready" and "CUDA graph capture" in said

        waited = _cli(root, "wait", name)
        assert waited.returncode == 0, waited.stderr
        assert f"{name} is ready at http://127.0.0.1:" in waited.stdout

        status = json.loads(_cli(root, "status", name, "--json").stdout)["stacks"][0]
        assert status["endpoint"]["ready"] is True and status["endpoint"]["loading"] is None
        health = _cli(root, "status", name).stdout
        # Docker's 30 s check is shown as ours: ready
        assert "ready" in health and "  starting  " not in health

        # the stack has been ready a while: `up` reports when it got ready, not when it looked
        time.sleep(2)
        summary = _cli(root, "up", name, "--emulate", "--json")
        assert summary.returncode == 0, summary.stderr
        report = json.loads(summary.stdout)
        assert report["ready_before"] is True and report["detection_latency_s"] is None
        assert 0 < report["time_to_ready_s"] < LOAD_S + held_s + 30, (
            report["time_to_ready_s"],
            held_s,
        )
        text = _cli(root, "up", name, "--emulate").stdout
        assert f"{name} is ready at http://127.0.0.1:" in text
        assert "(from its log: it was ready before this command)" in text and "seen " not in text
    finally:
        _cli(root, "down", name)


def test_wait_on_a_stack_that_is_not_there_names_up_with_emulate_when_it_was_emulated(tmp_path):
    root, name, _ = emulated_project(tmp_path, load=0.5)
    try:
        assert _cli(root, "up", name, "--emulate").returncode == 0
        subprocess.run(
            ["docker", "stop", "-t", "1", f"composegen-{name}-vllm-1"],
            capture_output=True,
            timeout=60,
        )
        gate = _cli(root, "gate", name)
        assert gate.returncode == 3 and f"composegen up {name} --emulate" in gate.stderr, (
            gate.stderr
        )
    finally:
        _cli(root, "down", name)


def test_wait_in_a_terminal_shows_the_load_and_ctrl_c_leaves_the_stack_loading(tmp_path):
    from tests.support.terminal import Terminal

    root, name, _ = emulated_project(
        tmp_path, load=LOAD_S, timeout=START_PERIOD_S, env={"EMU_WEIGHT_SHARDS": "4"}
    )
    term = Terminal(tmp_path, width=80, height=24)
    try:
        assert _cli(root, "up", name, "--emulate", "--no-wait").returncode == 0
        # the Ctrl-C comes while it loads, however slow the start
        with load_held(f"composegen-{name}-vllm-1"):
            term.start(
                [sys.executable, "-m", "composegen", "--root", str(root), "wait", name],
                cwd=tmp_path,
            )
            term.wait_for("▸ ")  # the block is drawn
            term.keys("C-c")
            assert term.wait_exit(60) == 130
        assert any(f"stopped waiting for {name}" in line for line in term.screen(joined=True))
        assert f"follow it again: `composegen wait {name}`" in " ".join(term.screen(joined=True))
        status = json.loads(_cli(root, "status", name, "--json").stdout)["stacks"][0]
        assert status["containers"][0]["state"] == "running"  # only the waiting stopped
        # `up` after the Ctrl-C picks the load up again
        resumed = _cli(root, "up", name, "--emulate")
        assert resumed.returncode == 0 and f"{name} is ready at" in resumed.stdout, resumed.stderr
    finally:
        term.close()
        _cli(root, "down", name)
