"""When each part of a switch ran, in seconds from the command's start. The origin is the process's
own start time (Linux /proc), so the CLI's start counts: a client waiting on the alias waits for it
too (issue 37: the alias moves within 2 s of the command's start). Without /proc the origin is the
switch's own start, and `start` is 0.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from composegen.edge.procstart import start_ticks
from composegen.edge.reports import StepTime


def process_age() -> float | None:
    """Seconds since this process started (its start_ticks against /proc/uptime, both in the
    kernel's clock ticks: 10 ms steps), None where /proc has neither."""
    started = start_ticks()
    try:
        uptime = float(Path("/proc/uptime").read_text(encoding="ascii").split()[0])
        ticks = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None
    return None if started is None else max(uptime - started / ticks, 0.0)


class Timeline:
    """The parts before the first step a client is told (`before`), each with its seconds."""

    def __init__(self) -> None:
        now = time.monotonic()
        self.origin = now - (process_age() or 0.0)
        self.last = self.origin
        self.before: list[StepTime] = []
        self.mark("start")

    def at(self, t: float) -> float:
        """T (time.monotonic()) in seconds from the command's start."""
        return round(t - self.origin, 3)

    def mark(self, name: str) -> None:
        """NAME ran from the last mark until now."""
        now = time.monotonic()
        self.before.append(
            StepTime(step=name, seconds=round(now - self.last, 3), at=self.at(self.last))
        )
        self.last = now
