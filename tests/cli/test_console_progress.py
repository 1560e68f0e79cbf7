"""The progress display without a terminal (one line per stage, heartbeats) and the block's geometry."""

from __future__ import annotations

import io

import pytest

from composegen.cli import console, stagelines
from composegen.stack.progress import LogLine, PullEvent
from composegen.vllm import stages
from tests.support import stagelog
from tests.vllm.test_stages import REAL


def _lines(name: str) -> list[tuple[float, str]]:
    return stagelog.logged_times((REAL / name).read_text(encoding="utf-8"))


def test_without_a_terminal_one_line_per_stage_change_and_heartbeats(monkeypatch):
    # every heartbeat call is due: no clock in the test
    monkeypatch.setattr(console, "HEARTBEAT_S", 0.0)
    out = io.StringIO()
    sink = console.ConsoleSink(timeout_s=900, stream=out, tty=False)
    sink.phase("starting", 0.0)
    log = _lines("serve-bf16-eager.log")
    for at, text in log:
        sink.log_line(LogLine(None, "c", at, text))
    sink.heartbeat(1.0, "")  # the engine is silent: still a line
    sink.close()
    said = [line.split("] ", 1)[1] for line in out.getvalue().splitlines()]
    stage_lines = [s for s in said if not s.startswith("…")]
    assert stage_lines == [
        "creating",
        "imports / starting engine",
        "loading weights",
        "profiling / KV cache",
        "API server starting",
        "ready",
    ]
    assert said[-1].startswith("… ready") and "left of startup_timeout" in said[-1]
    assert "last: " in said[-1]
    assert len(said) == len(stage_lines) + 1  # 131 engine lines, no line per engine line


def test_quiet_draws_nothing_but_keeps_the_phases_for_json():
    out = io.StringIO()
    sink = console.ConsoleSink(quiet=True, stream=out, tty=True)
    for at, text in _lines("serve-fp8-hermes-apikey.log"):
        sink.log_line(LogLine(None, "c", at, text))
    assert out.getvalue() == ""
    phases = sink.phases()
    assert [p.stage for p in phases] == ["imports", "weights", "kv_cache", "api", "ready"]
    assert phases[1].elapsed_s is not None and phases[1].seconds >= phases[0].seconds


def test_pull_events_add_up_bytes_across_layers():
    sink = console.ConsoleSink(quiet=True, stream=io.StringIO(), tty=False)
    for layer, status, current, total in [
        ("a", "Pulling fs layer", None, None),
        ("a", "Downloading", 100, 1000),
        ("b", "Downloading", 500, 3000),
        ("a", "Download complete", None, None),
    ]:
        sink.pull(PullEvent(None, "127.0.0.1:5123/x:1", layer, status, current, total))
    pull = sink.tracker.stages["pull"]
    assert (pull.done, pull.total, pull.unit) == (1500, 4000, "B")


@pytest.mark.parametrize("width", [40, 57, 80, 132, 200])
def test_the_block_has_a_fixed_height_and_never_exceeds_the_width(width):
    tracker = stages.StageTracker(0.0, timeout_s=1800)
    heights = set()
    for at, text in _lines("serve-bf16-eager.log"):
        tracker.feed(text, at)
        lines = stagelines.block_lines(tracker, at + 0.5, width)
        heights.add(len(lines))
        assert all(len(line) <= width for line in lines), lines
    assert heights == {stagelines.HEIGHT}


def test_clock():
    assert [stagelines.clock(s) for s in (None, 0, 42.4, 725, 3729)] == [
        "?",
        "0:00",
        "0:42",
        "12:05",
        "1:02:09",
    ]


def test_a_multi_node_display_follows_the_head_not_the_workers():
    sink = console.ConsoleSink(quiet=True, stream=io.StringIO(), tty=False)
    sink.log_line(
        LogLine("n0", "h", 1.0, "(APIServer pid=1) INFO 11-30 15:00:01 [api_server.py:1] starting")
    )
    sink.log_line(
        LogLine(
            "n0",
            "h",
            2.0,
            "(Worker_TP0 pid=2) Loading safetensors checkpoint shards:  25% Completed | 1/4",
        )
    )
    sink.log_line(
        LogLine(
            "n1",
            "w",
            3.0,
            "(Worker_TP2 pid=3) Loading safetensors checkpoint shards:  75% Completed | 3/4",
        )
    )
    assert sink.tracker.summary() == "loading weights 1/4"


# seven stages: the longest line
GRAPHS = REAL.parent / "real-0.26.0-h200-graphs" / "serve-hermes-graphs.log"


def _stage_lines(lines: list[str]) -> list[str]:
    return [line for line in lines[2:] if line.startswith(("  ✓ ", "    "))]


@pytest.mark.parametrize("width", [40, 57, 80])
def test_finished_stages_fold_whole_or_are_counted_never_cut(width):
    tracker = stages.StageTracker(0.0, timeout_s=1800)
    logged = stagelog.logged_times(GRAPHS.read_text(encoding="utf-8"))
    for at, text in logged:
        tracker.feed(text, at)
        lines = stagelines.block_lines(tracker, at + 0.5, width)
        assert len(lines) == stagelines.HEIGHT and all(len(line) <= width for line in lines), lines
        assert not any("…" in line for line in _stage_lines(lines)), lines  # whole items only
    final = stagelines.block_lines(tracker, logged[-1][0] + 0.5, width)
    finished = [r for r in tracker.view(logged[-1][0]) if not r["active"] and r["stage"] != "ready"]
    items = " · ".join(line[4:] for line in _stage_lines(final)).split(" · ")
    earlier = int(items.pop(0).split()[0][1:]) if items[0].endswith(" earlier") else 0
    assert earlier + len(items) == len(finished) == 7, final  # every stage shown, or counted
    # the latest kept
    assert [i.rsplit(" ", 1)[0] for i in items] == [r["label"] for r in finished[earlier:]]
    if width == 80:
        assert final[2:] == [
            "  ✓ +2 earlier · torch.compile 0:08 · profiling / KV cache 0:05",
            "    CUDA graph capture 0:01 · warm-up 0:09 · API server starting 0:02",
        ]
