"""Run the composegen CLI in this process (no interpreter start per call), and the checks every
bad-input test makes on the outcome: exit 2, one line, no traceback, nothing written.

`run_cli` here is a drop-in for `tests.support.helpers.run_cli` (same arguments, a CompletedProcess
back): the same entry as the console script (the fast path, then typer), the same environment, working
directory (the checkout unless `cwd`) and an empty stdin, captured. Use the subprocess one only where
a process boundary is under test: signals and Ctrl-C, a terminal, the installed tool, import-time cost,
crash logs, a child left running. An `env` that sets a variable read once a process (`ONCE_ENV`:
at import, or by the docker SDK client kept per process) goes to a subprocess, so it counts as it
would for a user. COMPOSEGEN_TEST_SUBPROCESS=1 sends every call to a subprocess (to compare, or to
time the difference: docs/testing.md). The capture is of sys.stdout/sys.stderr: what a thread of the test
prints meanwhile (a server it runs) lands in it too."""

from __future__ import annotations

import contextlib
import gc
import io
import os
import subprocess
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

REPO = Path(__file__).resolve().parents[2]
MAIN = str(REPO / "composegen" / "__main__.py")  # sys.argv[0] of `python -m composegen`
# read once: when their module is imported (stack/engine.py, cli/console.py), when the SDK client is made
ONCE_ENV = frozenset({"COMPOSEGEN_BASE_IMAGE", "COMPOSEGEN_HEARTBEAT_S", "DOCKER_CONFIG"})


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


def run_inproc(*args: str, env: dict | None = None, cwd: Path | None = None) -> Result:
    """`composegen ARGS` through the same main() the console script calls (typer path), captured."""
    code, out, err = _invoke(["composegen", *args], env, cwd)
    return Result(code, out, err)


def run_cli(
    *args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    """`composegen ARGS` as helpers.run_cli runs it, in this process (`timeout` is the subprocess
    path's alone)."""
    if (env and ONCE_ENV & env.keys()) or os.environ.get("COMPOSEGEN_TEST_SUBPROCESS") == "1":
        from tests.support.helpers import run_cli as in_subprocess

        return in_subprocess(*args, cwd=cwd, env=env, timeout=timeout)
    argv = [sys.executable, "-m", "composegen", *args]
    # as `python -m composegen` names itself in usage lines ("Usage: python -m composegen …")
    main_module = types.ModuleType("__main__")
    main_module.__package__ = "composegen"
    previous = sys.modules["__main__"]
    sys.modules["__main__"] = main_module
    try:
        code, out, err = _invoke([MAIN, *args], env, cwd or REPO, fast_path=True)
    finally:
        sys.modules["__main__"] = previous
    return subprocess.CompletedProcess(argv, code, out, err)


def _invoke(
    argv: list[str], env: dict | None, cwd: Path | None, fast_path: bool = False
) -> tuple[int, str, str]:
    from composegen.cli import fastpath
    from composegen.cli.app import _state
    from composegen.cli.main import main

    stdout, stderr = io.StringIO(), io.StringIO()
    code: int | None = None
    previous, collecting = Path.cwd(), gc.isenabled()
    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(sys, "argv", argv))
        stack.enter_context(mock.patch.object(sys, "stdin", io.StringIO("")))
        stack.enter_context(mock.patch.dict(os.environ, {"NO_COLOR": "1", **(env or {})}))
        stack.enter_context(contextlib.redirect_stdout(stdout))
        stack.enter_context(contextlib.redirect_stderr(stderr))
        if cwd is not None:
            os.chdir(cwd)
        try:
            code = fastpath.run(argv[1:]) if fast_path else None
            if code is None:
                main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except KeyboardInterrupt:  # entry.main's answer to a Ctrl-C before exits.run is in charge
            stderr.write("composegen: interrupted\n")
            code = 130
        finally:
            os.chdir(previous)
            if collecting:  # a one-shot command may switch the collector off (fastpath's shm scan)
                gc.enable()
            _state["root"] = None  # the typer callback keeps --root between calls in one process
    return code or 0, stdout.getvalue(), stderr.getvalue()


def assert_bad_input(res: Result, expected: str | None = None) -> None:
    """Exit 2 with one line (plus at most a hint), no traceback or internal error."""
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    if expected is not None:
        assert expected in res.stderr, res.stderr
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr, res.stderr
    assert 1 <= len(res.stderr.strip().splitlines()) <= 2, res.stderr


def assert_no_crash(res: Result) -> None:
    """Any ordinary outcome (0 ok, 1 check failed, 2 bad input); never an internal error."""
    assert res.returncode in (0, 1, 2), (res.returncode, res.stdout[-2000:], res.stderr[-2000:])
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr, res.stderr
