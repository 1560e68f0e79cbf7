"""promote and rollback show the operator what they do while they run (issue 51 #1): the steps their
clients are told, fed through the switch's own StageSink as a cold switch feeds it (a recorded vLLM start
for its load) — piped, one line per step; at a terminal, `up`'s block with what the clients are told.
The real terminal (tmux, 80x24) is in tests/edge/test_switch_engine.py."""

from __future__ import annotations

import io
import re
import time

import pytest

from composegen.cli.console import SwitchConsole
from composegen.edge import service, undo
from composegen.project import Project
from composegen.stack.progress import LogLine
from tests.support import stagelog
from tests.support.edge import edge_project
from tests.vllm.test_stages import REAL

IMAGE = "127.0.0.1:5000/composegen-edge-caddy@sha256:" + "0" * 64


@pytest.fixture(scope="module")
def switched(tmp_path_factory):
    """A cold rollback's events (stop the serving stack, start the other one, gates) through the
    switch's StageSink into the display, piped; the block drawn at 80 columns while it loads weights."""
    edge = edge_project(tmp_path_factory.mktemp("switch"), IMAGE)
    project = Project(edge.root)
    out = io.StringIO()
    show = SwitchConsole("ds4-flash", stream=out, tty=False)
    sink = undo.StageSink(project, service.load(project), "ds4-flash", edge.old, show=show)
    sink.run(f"stopping {edge.new}", lambda: None)
    for phase in ("preflight", "starting", "created", "running"):
        sink.phase(phase, 0.0)
    log = stagelog.logged_times((REAL / "serve-bf16-eager.log").read_text(encoding="utf-8"))
    block: list[str] = []
    for at, text in log:
        sink.log_line(LogLine(None, "c", at, text))
        if not block and show._told.startswith("loading weights"):
            block = show.lines(at, 80)
    sink.run(f"gates on {edge.old}", lambda: None)
    show.close()
    return edge, sink, out.getvalue().splitlines(), block


def test_piped_one_line_per_step_the_clients_were_told(switched):
    edge, sink, lines, _ = switched
    said = [re.fullmatch(r"\[ *\d+\.\ds\] (.+)", line).group(1) for line in lines]
    told = list(dict.fromkeys(re.sub(r" \d+/\d+$", "", s) for s in sink.seen))
    assert said == told, lines
    assert said[0] == f"stopping {edge.new}" and said[-1] == f"gates on {edge.old}"
    assert "loading weights" in said and "imports / starting engine" in said


def test_at_a_terminal_the_block_shows_the_load_and_what_clients_are_told(switched):
    _, _, _, block = switched
    assert len(block) == 4 and all(len(line) <= 80 for line in block), block
    assert block[0].startswith("▸ loading weights") and "shards" in block[0], block
    assert "ds4-flash answers 503 + Retry-After: loading weights 0/1" in block[1], block
    assert block[2].startswith("  ✓ ") and block[2].endswith("imports / starting engine 0:00"), (
        block
    )
    assert block[3].startswith("  │ ") and "safetensors" in block[3], block


def test_at_a_terminal_the_clock_advances_while_a_step_says_nothing():
    """A step that prints nothing (a down, a wake, the gates): the block still redraws its clocks, as
    `up`'s does (one ticker in ConsoleSink), and stops with the switch."""
    out = io.StringIO()
    show = SwitchConsole("ds4-flash", stream=out, tty=True)
    show.told("gates on x")
    deadline = time.monotonic() + 10
    while "elapsed 0:01" not in out.getvalue():
        assert time.monotonic() < deadline, out.getvalue()[-500:]
        time.sleep(0.1)
    show.close()
    assert "gates on x 0:01" in out.getvalue()
