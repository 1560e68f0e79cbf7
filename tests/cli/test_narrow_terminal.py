"""80 columns (tmux, 80x24): `up` prints one row per passing preflight check (cut, whole with --verbose) and
every warning whole (folded), says the
clamped-ulimit warning once, and folds its summary at words; `status` drops columns until its rows fit and
says which; `shm` folds a wide row's holders under it. Piped, every row stays whole."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import devshm
from tests.support.cli import run_cli
from tests.support.engine import emulated_project, force_remove
from tests.support.terminal import Terminal

pytestmark = pytest.mark.docker

WIDTH = 80


def _cli(root: Path, *argv: str) -> list[str]:
    return [sys.executable, "-m", "composegen", "--root", str(root), *argv]


def _in_terminal(tmp: Path, argv: list[str], timeout: float = 300) -> tuple[int, list[str], str]:
    term = Terminal(tmp, width=WIDTH, height=24)
    try:
        code = term.run(argv, cwd=tmp, timeout=timeout)
        return code, term.screen(joined=True), term.drawn()
    finally:
        term.close()


def test_up_and_status_fit_80_columns_and_stay_whole_when_piped(tmp_path):
    root, name, _ = emulated_project(tmp_path, load=0.5)
    try:
        code, screen, _ = _in_terminal(tmp_path, _cli(root, "up", name, "--emulate"))
        assert code == 0, "\n".join(screen)
        assert all(len(line) <= WIDTH for line in screen), [
            line for line in screen if len(line) > WIDTH
        ]
        checks = [line for line in screen if line.startswith("preflight ")]
        # a passing check is one row, cut; a warning is never the one cut: folded at words, whole
        assert len(checks) >= 8 and any(line.endswith("…") for line in checks)
        assert not any(line.startswith("preflight warn") and line.endswith("…") for line in checks)
        assert "every start would download the weights into the container" in " ".join(
            " ".join(screen).split()
        )
        # said once: preflight, not the summary again
        assert sum("ulimit" in line for line in screen) == 1, screen
        assert any(line.startswith(f"{name} is ready at ") for line in screen)

        # --verbose: every check whole (the terminal folds the long ones).
        assert run_cli("--root", str(root), "down", name).returncode == 0
        code, screen, drawn = _in_terminal(
            tmp_path, _cli(root, "up", name, "--emulate", "--verbose")
        )
        assert (
            code == 0
            and "every start would download the weights into the container"
            in " ".join(drawn.split())
        )

        code, screen, _ = _in_terminal(tmp_path, _cli(root, "status", name))
        assert code == 0 and all(len(line) <= WIDTH for line in screen), screen
        header = screen[0].split()
        assert header[:2] == ["PROFILE", "STATE"] and "API" in header and "RESTARTS" not in header
        assert any(line.startswith("(not shown at 80 columns: RESTARTS") for line in screen), screen
        # not a terminal: every column, full rows
        piped = run_cli("--root", str(root), "status", name)
        assert piped.stdout.split()[:12] == [
            "PROFILE",
            "CONTAINER",
            "STATE",
            "HEALTH",
            "RESTARTS",
            "UPTIME",
            "ENDPOINT",
            "MODEL",
            "API",
            "MAX_LEN",
            "DRIFT",
            f"{name}",
        ]
        assert run_cli("--root", str(root), "down", name).returncode == 0
        # piped: checks whole
        up_piped = run_cli("--root", str(root), "up", name, "--emulate", timeout=300)
        assert "every start would download the weights into the container" in up_piped.stderr, (
            up_piped.stderr
        )
    finally:
        run_cli("--root", str(root), "down", name)
        force_remove(f"composegen-{name}")


def test_a_wide_shm_row_folds_its_holders_at_80_columns(tmp_path):
    shm = devshm.make_dir("narrow")
    held = shm / ("psm_" + "a" * 28)  # the row fits 80 without its holders, not with them
    held.write_bytes(b"x" * 4096)
    holder = subprocess.Popen(  # holds the file open (a real holder with a pid and a command)
        [sys.executable, "-c", f"import time; f = open({str(held)!r}, 'rb'); time.sleep(600)"],
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    try:
        piped = run_cli("shm", "--path", str(shm))
        deadline = 50
        while f"{holder.pid}/" not in piped.stdout and deadline:
            deadline -= 1
            piped = run_cli("shm", "--path", str(shm))
        row = next(line for line in piped.stdout.splitlines() if held.name in line)
        assert f"{holder.pid}/" in row and len(row) > WIDTH  # piped: one whole row
        code, screen, _ = _in_terminal(
            tmp_path, [sys.executable, "-m", "composegen", "shm", "--path", str(shm)]
        )
        assert code == 0 and all(len(line) <= WIDTH for line in screen), screen
        at = next(i for i, line in enumerate(screen) if held.name in line)
        assert f"{holder.pid}/" not in screen[at] and screen[at + 1].startswith(
            f"    held by {holder.pid}/"
        )
    finally:
        holder.kill()
        holder.wait(10)
        shutil.rmtree(shm, ignore_errors=True)
