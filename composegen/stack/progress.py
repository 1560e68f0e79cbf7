"""What a stack reports while it starts: the sink the CLI (or any caller) plugs its display into.

`ProgressSink` has one no-op method per event (docs/stack.md lists them); subclass it and override
what you show. Events arrive on the caller's thread, in order."""

from __future__ import annotations

from dataclasses import dataclass

from composegen.stack.preflight import Check


@dataclass(frozen=True)
class LogLine:
    node: str | None  # the node of a multi-node stack; None for a single-node stack
    container: str
    timestamp: float | None  # epoch seconds, from Docker's log timestamp
    text: str


@dataclass(frozen=True)
class PullEvent:
    node: str | None
    image: str
    layer: str
    status: str  # the engine's words: "Pulling fs layer", "Downloading", "Pull complete", ...
    current: int | None  # bytes so far (Downloading/Extracting), else None
    total: int | None


class ProgressSink:
    """No-op by default: a caller that wants nothing passes ProgressSink()."""

    # The sink prints every check as it comes, reasons included: a failed preflight then ends in one
    # line naming the failed checks (driver.start) instead of repeating the first reason.
    shows_checks: bool = False

    def check(self, check: Check) -> None: ...
    def phase(self, name: str, t: float) -> None: ...
    def log_line(self, line: LogLine) -> None: ...
    def pull(self, event: PullEvent) -> None: ...
    def heartbeat(self, t: float, last_line: str) -> None: ...
    def note(self, text: str) -> None: ...
    def told(self, stage: str) -> None:
        """What an alias's clients are told meanwhile (a switch: 503 + Retry-After + STAGE)."""
