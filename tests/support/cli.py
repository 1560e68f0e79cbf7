"""Run the composegen CLI in this process (no interpreter start per call), and the checks every
bad-input test makes on the outcome: exit 2, one line, no traceback, nothing written."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from unittest import mock


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


def run_inproc(*args: str, env: dict | None = None, cwd: Path | None = None) -> Result:
    """`composegen ARGS` through the same main() the console script calls (typer path), captured."""
    from composegen.cli.app import _state
    from composegen.cli.main import main

    stdout, stderr = io.StringIO(), io.StringIO()
    code = 0
    previous = Path.cwd()
    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(sys, "argv", ["composegen", *args]))
        stack.enter_context(mock.patch.dict(os.environ, {"NO_COLOR": "1", **(env or {})}))
        stack.enter_context(contextlib.redirect_stdout(stdout))
        stack.enter_context(contextlib.redirect_stderr(stderr))
        if cwd is not None:
            os.chdir(cwd)
        try:
            main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        finally:
            os.chdir(previous)
            _state["root"] = None  # the typer callback keeps --root between calls in one process
    return Result(code, stdout.getvalue(), stderr.getvalue())


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
