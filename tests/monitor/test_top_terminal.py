"""`composegen top` in a real 80x24 terminal (tmux): a key hint under the view, `q` quits at once with exit 0
(the terminal's mode restored), and `--count N` leaves its last line ended so the shell's prompt starts on a
line of its own. An engine seen through --url is not known to be emulated: nothing claimed."""

from __future__ import annotations

import sys
import time

import pytest

from tests.emulator.test_emulator_metrics import TINY_ENV
from tests.support.cli import run_cli
from tests.support.emulator_proc import RECORDED_FLAGS, EmulatorProc
from tests.support.terminal import Terminal


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    with EmulatorProc.start(
        tmp_path_factory.mktemp("top-keys"), serve_args=RECORDED_FLAGS, env=TINY_ENV
    ) as emu:
        yield emu


def test_q_quits_the_live_view_and_the_key_hint_says_so(engine, tmp_path):
    term = Terminal(tmp_path, width=80, height=24)
    try:
        term.start(
            [
                sys.executable,
                "-m",
                "composegen",
                "top",
                "--url",
                engine.base_url,
                "--interval",
                "5",
            ],
            tmp_path,
        )
        term.wait_for("q quit", timeout=60)
        pressed = time.monotonic()
        term.keys("q")
        assert term.wait_exit(timeout=10) == 0, "\n".join(term.screen())
        assert time.monotonic() - pressed < 4  # not after the 5 s interval: the key ends the wait
        screen = term.screen()
        assert (
            any(line.startswith("composegen top ") for line in screen)
            and "EMULATED" not in term.drawn()
        )
        assert all(len(line) <= 80 for line in screen)
    finally:
        term.close()


def test_count_ends_with_a_newline_in_a_terminal_and_piped(engine, tmp_path):
    argv = [
        sys.executable,
        "-m",
        "composegen",
        "top",
        "--url",
        engine.base_url,
        "--count",
        "2",
        "--interval",
        "0.2",
    ]
    term = Terminal(tmp_path, width=80, height=24)
    try:
        assert term.run(argv, tmp_path, timeout=60) == 0, "\n".join(term.screen())
        raw = term.raw.read_bytes()
        # the hint's line ended, no blank line
        assert raw.endswith(b"q quit\x1b[0m\r\n\x1b[?25h"), raw[-80:]
    finally:
        term.close()
    piped = run_cli("top", "--url", engine.base_url, "--count", "2", "--interval", "0.2")
    assert piped.returncode == 0 and piped.stdout.endswith("\n"), piped.stdout[-80:]
    assert "q quit" not in piped.stdout  # no keys without a terminal: no hint
