"""A recorded vLLM log replayed through the stage tracker: its lines with the times vLLM logged."""

from __future__ import annotations

import re

from composegen.vllm import stages

# vLLM's own `MM-DD HH:MM:SS` stamp in a line
LOGGED_AT = re.compile(
    r" (?P<mo>\d\d)-(?P<d>\d\d) (?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d(?:\.\d+)?) \["
)


def logged_times(text: str) -> list[tuple[float, str]]:
    """(seconds, line) for a log without Docker timestamps: vLLM's own `MM-DD HH:MM:SS` (seconds
    since the month's start; the year does not matter for durations), a line without one gets its
    predecessor's time."""
    rows, at = [], 0.0
    for line in text.splitlines():
        m = LOGGED_AT.search(stages.ANSI_CSI.sub("", line))
        if m:
            at = ((int(m["d"]) * 24 + int(m["h"])) * 60 + int(m["m"])) * 60 + float(m["s"])
        rows.append((at, line))
    return rows


def from_log(
    lines: list[tuple[float, str]], started_at: float | None = None
) -> stages.StageTracker:
    """A tracker fed a whole recorded log of (epoch seconds, line) pairs; `started_at` is the
    launch, when known (the imports stage then starts there)."""
    tracker = stages.StageTracker(
        started_at if started_at is not None else (lines[0][0] if lines else 0.0)
    )
    if started_at is not None:
        tracker.launched(started_at)
    for at, line in lines:
        tracker.feed(line, at)
    return tracker
