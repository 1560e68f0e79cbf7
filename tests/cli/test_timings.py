"""Times that agree with each other (issue 51 #8), from a recorded vLLM start: a second `up` attaching to a
start already under way replays its stages in the order and at the times the engine logged them; the
block's `✓ ready in` of a stack that was ready before the command is when its engine said so, as the
summary's time to ready is; `status` never says ready and starting in one breath."""

from __future__ import annotations

import io
import re
import time

from composegen.cli import console, stagelines
from composegen.stack import loadstate
from composegen.stack.progress import LogLine
from composegen.vllm import stages
from tests.support import stagelog
from tests.vllm.test_stages import REAL


def _log(started: float) -> list[tuple[float, str]]:
    """The recorded start's lines, timed as if its container started at STARTED (first line 0.5 s on)."""
    log = stagelog.logged_times((REAL / "serve-bf16-eager.log").read_text(encoding="utf-8"))
    return [(started + 0.5 + at - log[0][0], text) for at, text in log]


def test_attaching_to_a_start_replays_its_stages_forward_in_time():
    out = io.StringIO()
    sink = console.ConsoleSink(timeout_s=900, stream=out, tty=False)
    sink.phase("starting", 60.0)  # `up` of a stack whose container started a minute ago
    sink.phase("running", 0.1)  # the state poll answers before the log follower's replay
    for at, text in _log(time.time() - 60.0):
        sink.log_line(LogLine(None, "c", at, text))
    sink.close()
    said = [(float(t), s) for t, s in re.findall(r"\[ *([\d.]+)s\] (.+)", out.getvalue())]
    assert [s for _, s in said][:3] == [
        "imports / starting engine",
        "loading weights",
        "profiling / KV cache",
    ]
    times = [t for t, _ in said]
    assert times == sorted(times) and times[0] < 1.0, said


def test_ready_in_is_when_the_engine_said_so_not_when_the_block_was_drawn():
    started = time.time() - 90.0  # the block drawn long after the engine said ready
    tracker = stages.StageTracker(started)
    log = _log(started)
    for at, text in log:
        tracker.feed(text, at)
    assert tracker.current is not None and tracker.current.key == "ready"
    ready_at = tracker.stages["ready"].first_at - started
    head = stagelines.block_lines(tracker, time.time(), 80)[0]
    assert head == f"✓ ready in {stagelines.clock(ready_at)}", (head, ready_at)
    assert 40 < ready_at < 45  # the recording: ready 41 s after its first line


def test_status_says_ready_without_docker_starting_beside_it():
    # Docker's first check comes up to 30 s after the API answers (docs/progress.md)
    shown = loadstate.health_text("starting", ready=True)
    assert shown.startswith("ready") and "starting" not in shown
