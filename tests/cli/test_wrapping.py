"""Text for a person folds at word boundaries at a terminal (issue 51 #7): one place, output.out/err, so the
switch summary, `path: standby (…`, hints, record paths and preflight's lines never break inside a word at
80 columns; piped, every line stays whole (scripts grep it)."""

from __future__ import annotations

import io
import sys

import pytest

from composegen import output
from tests.support.cli import run_cli

# The switch summary and follow-up hint as a promote prints them (docs/records/standby.md).
SWITCH = (
    "ds4-flash: sbd4096 → sbd8192 (promote, 1.7 s)\n"
    "  clients were told (503 + Retry-After): draining → putting sbd4096 to sleep → waking sbd8192 →"
    " warm-up → identity → gates on sbd8192\n"
    "  path: standby (sbd4096 and sbd8192 are resident (standby), sbd8192 asleep; WARNING: sleep not"
    " qualified here (`composegen qualify sbd8192 --sleep-cycles 10`))\n"
    "record: runs/campaigns/a-rather-long-campaign-name-for-this-team/campaign.md and"
    " runs/campaigns/a-rather-long-campaign-name-for-this-team/comparison.json"
)


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def _words_intact(printed: str, screen: list[str]) -> list[str]:
    """Screen words that are not words of the printed text: pieces of a word broken in two."""
    words = set(printed.split())
    return [w for line in screen for w in line.split() if w not in words]


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_at_a_terminal_lines_fold_at_words_under_its_width(monkeypatch, stream):
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setattr(sys, stream, Tty())
    (output.out if stream == "stdout" else output.err)(SWITCH)
    lines = getattr(sys, stream).getvalue().splitlines()
    assert max(len(line) for line in lines) <= 80, lines
    assert not _words_intact(SWITCH, lines), lines
    assert lines[0] == SWITCH.splitlines()[0]  # a line that fits is as it was
    path = next(i for i, line in enumerate(lines) if line.startswith("  path: standby"))
    assert lines[path + 1].startswith("    ") and lines[path + 1][4] != " ", lines  # hangs: 2 + 2


def test_piped_every_line_stays_whole(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "80")
    output.out(SWITCH)
    assert capsys.readouterr().out == SWITCH + "\n"


def test_a_word_longer_than_the_line_stays_whole(monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    monkeypatch.setattr(sys, "stdout", Tty())
    path = "/root/.cache/huggingface/hub/models--Qwen--Qwen3-0.6B/snapshots/" + "0" * 40
    output.out(f"preflight FAIL weights: incomplete in {path}: missing config.json")
    assert f"  {path}:" in sys.stdout.getvalue().splitlines(), sys.stdout.getvalue()


def test_in_a_real_terminal_at_80x24_no_line_breaks_inside_a_word(tmp_path):
    """`up` of a profile this machine cannot start (no GPU, no weights): preflight's FAIL lines and the
    closing error line, drawn by tmux at 80x24, against the same command piped."""
    from tests.support.terminal import Terminal

    root = tmp_path / "mine"
    assert run_cli("init", str(root), cwd=tmp_path).returncode == 0
    piped = run_cli("up", "starter", cwd=root)
    assert piped.returncode != 0 and "preflight failed" in piped.stderr, piped.stderr
    assert any(len(line) > 80 for line in (piped.stdout + piped.stderr).splitlines())
    term = Terminal(tmp_path, width=80, height=24)
    try:
        code = term.run([sys.executable, "-m", "composegen", "up", "starter"], root, timeout=120)
        screen = term.screen(joined=True)  # lines the terminal wrapped itself joined again
    finally:
        term.close()
    assert code == piped.returncode, screen
    # composegen broke lines only at spaces (a passing check's line is cut, marked …); a path wider
    # than the line is the one word the terminal itself breaks (tmux does not always join it back)
    printed = piped.stdout + piped.stderr
    broken = [
        w for w in _words_intact(printed, screen) if not ("…" in w or "/" in w or w[0].isdigit())
    ]
    assert not broken, "\n".join(screen)
    assert any("preflight failed" in line for line in screen), screen
