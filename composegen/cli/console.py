"""Progress of a starting stack on stderr (the lines it draws: stagelines.py; the ready summary:
readysummary.py).

On a terminal: one block of fixed height (rich Live), every line cut to the terminal's width, so it
never wraps and redraws in place at any width from 40 columns, its clocks every TICK_S even while
nothing is said (compose creating a container; a switch's down, wake or gates). Elsewhere (CI logs,
pipes): one line per stage change and a heartbeat line every HEARTBEAT_S, even when the engine says
nothing.

`ConsoleSink` is a stack.progress.ProgressSink: the stack reports checks, phases, log lines and pull
events; the sink keeps a stages.StageTracker and draws it. Use it as a context manager (the live
block is stopped however the wait ends).
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, TextIO

from composegen.cli.stagelines import block_lines, clock, cut, fold_stages, status_line
from composegen.output import fold, inert, mask
from composegen.stack.progress import LogLine, ProgressSink, PullEvent
from composegen.stack.reports import Check, PhaseTime, UpReport
from composegen.vllm import stages

if TYPE_CHECKING:  # annotations only: rich loads when a terminal draws (start-up time)
    from rich.console import Console, Group
    from rich.live import Live


def _seconds_from_env(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name) or default)
    except ValueError:
        return default
    return value if value > 0 else default


# without a terminal; the tests shorten it
HEARTBEAT_S = _seconds_from_env("COMPOSEGEN_HEARTBEAT_S", 30.0)
REDRAW_S, TICK_S = 0.25, 0.5
_MARK = {"ok": "ok  ", "warn": "warn", "fail": "FAIL"}


class ConsoleSink(ProgressSink):
    """Tracks the stages of one start and draws them (nothing when `quiet`: `--json` still gets the
    phases)."""

    transient = False  # the block stays on screen when it stops

    def __init__(
        self,
        timeout_s: float | None = None,
        quiet: bool = False,
        stream: TextIO | None = None,
        tty: bool | None = None,
        verbose: bool = False,
    ) -> None:
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.verbose = verbose  # preflight lines whole at a terminal too
        self.tty = self.stream.isatty() if tty is None else tty
        self.tracker = stages.StageTracker(time.time(), timeout_s)
        self._pulls: dict[str, tuple[int, int]] = {}  # layer -> (bytes done, bytes total)
        self._live: Any = None  # rich.live.Live once the first frame is drawn
        self._lock, self._stopped = threading.RLock(), threading.Event()  # events vs. the ticker
        self._console: Any = None  # rich.console.Console on a terminal
        self._drawn = 0.0
        self._said = time.time()  # the first heartbeat comes HEARTBEAT_S after the start
        self._stage: str | None = None
        self._answering = False  # the API answered (readiness)
        self._head: str | None = None  # the head node's name, once its API server logged
        # every check is printed: a failed preflight's error only names them
        self.shows_checks = not quiet

    # ---- events from the stack ----
    def check(self, check: Check) -> None:
        line = f"preflight {_MARK.get(check.status, check.status)} {check.name}: {check.message}"
        # one row per passing check; a warning or a FAIL is what the reader needs whole: folded
        if self.tty and not self.verbose:
            width = self._terminal().width
            line = cut(line, width) if check.status == "ok" else fold(line, width, "    ")
        self._print(line)

    def phase(self, name: str, t: float) -> None:
        with self._lock:
            current = self.tracker.current
            # compose up (t = 0), or attaching to a start t seconds old: timeouts count from it
            if name == "starting":
                self.tracker.started_at = time.time() - t
                if t < 1.0 and (current is None or current.key == "pull"):
                    self.tracker.begin("create", time.time())
            # the container runs: Python imports before vLLM's first line (attached: its start)
            elif name == "running":
                fresh = current is not None and current.key in ("pull", "create")
                self.tracker.launched(time.time() if fresh else self.tracker.started_at)
            elif name in ("health 200", "models ready"):
                # the engine logged `Application startup complete.` before it answered, but the line
                # may be on its way from the log follower: ready from the log, or at close() at last
                self._answering = True
            self._changed()

    def log_line(self, line: LogLine) -> None:
        with self._lock:
            # a multi-node stack: the node with the API server is the head
            if (
                line.node is not None
                and self._head is None
                and stages.is_api_server_line(line.text)
            ):
                self._head = line.node
            if self._head is not None and line.node != self._head:
                return  # the workers load their shards too: the stages are the head's
            if self.tracker.feed(
                line.text, line.timestamp if line.timestamp is not None else time.time()
            ):
                self._changed()

    def pull(self, event: PullEvent) -> None:
        """Bytes of the layers the engine downloads (a layer already present counts nothing)."""
        with self._lock:
            status = event.status.lower()
            if status == "downloading" and event.total:
                self._pulls[event.layer] = (min(event.current or 0, event.total), event.total)
            elif status in ("download complete", "pull complete") and event.layer in self._pulls:
                size = self._pulls[event.layer][1]
                self._pulls[event.layer] = (size, size)
            done = sum(d for d, _ in self._pulls.values())
            total = sum(t for _, t in self._pulls.values())
            self.tracker.progress("pull", done, total or None, time.time(), "B")
            self.tracker.stages["pull"].detail = event.image
            self._changed()

    def heartbeat(self, t: float, last_line: str) -> None:
        now = time.time()
        if not self.tty and not self.quiet and now - self._said >= HEARTBEAT_S:
            self._say(now, changed=False)

    def note(self, text: str) -> None:
        self._print(text)

    # ---- drawing ----
    def _print(self, text: str) -> None:
        if self.quiet:
            return
        text = mask(_shown(text))  # inert, and secrets never reach the terminal (composegen.output)
        # word-wrapped to the terminal by rich (above the live block once it runs): never
        # auto-wrapped
        if self.tty:
            self._terminal().print(text, markup=False, highlight=False)
        else:
            self.stream.write(text + "\n")
            self.stream.flush()

    def _changed(self) -> None:
        current = self.tracker.current
        key = "failed" if self.tracker.failed else (current.key if current else None)
        if key == self._stage:
            return self._draw(force=False)
        self._stage = key
        if not self.tty and not self.quiet:
            self._say(time.time(), changed=True)
        self._draw(force=True)

    def _say(self, now: float, changed: bool) -> None:
        """A plain line: the new stage, or (heartbeat) where the start is and the engine's last
        line."""
        at = now
        if changed:
            current = self.tracker.current
            text = (
                f"failed: {self.tracker.failed}"
                if self.tracker.failed
                else (current.label if current else "")
            )
            if current is not None and not self.tracker.failed:
                # when the engine logged it (`wait` replays what came before; ready has no duration)
                at = current.entered_at or current.first_at
        else:
            last = self.tracker.last_line
            text = "… " + status_line(self.tracker, now) + (f" · last: {last}" if last else "")
        self._said = now
        self._print(f"[{at - self.tracker.started_at:7.1f}s] {text}")

    def _draw(self, force: bool) -> None:
        if self.quiet:
            return
        now = time.time()
        if not self.tty:
            return
        if not force and now - self._drawn < REDRAW_S:
            return
        self._drawn = now
        live = self._start_live()
        width = max(20, live.console.width)
        live.update(_render(self.lines(now, width)), refresh=True)

    def lines(self, now: float, width: int) -> list[str]:
        return block_lines(self.tracker, now, width)

    def _terminal(self) -> Console:
        if self._console is None:
            from rich.console import Console

            self._console = Console(file=self.stream, force_terminal=True, soft_wrap=False)
        return self._console

    def _start_live(self) -> Live:
        if self._live is None:
            from rich.live import Live

            self._live = Live(
                console=self._terminal(),
                auto_refresh=False,
                transient=self.transient,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self._live.start()
            threading.Thread(target=self._tick, name="composegen-progress", daemon=True).start()
        return self._live

    def _tick(self) -> None:
        while not self._stopped.wait(TICK_S):
            with self._lock:
                if self._live is not None:
                    self._draw(force=False)

    def close(self) -> None:
        """Draw the last state and stop the live block (it stays on screen)."""
        with self._lock:
            current = self.tracker.current
            if self._answering and (current is None or current.key != "ready"):
                self.tracker.begin("ready", time.time())
                self._changed()
            if self._live is not None:
                self._stopped.set()
                self._draw(force=True)
                self._live.stop()
                self._live = None

    def __enter__(self) -> ConsoleSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def phases(self) -> list[PhaseTime]:
        """The stages for `up --json` `phases` (additions to the readiness phases)."""
        return [PhaseTime.model_validate(p) for p in self.tracker.phases(time.time())]


class SwitchConsole(ConsoleSink):
    """A promote or rollback: each step its clients are told (503 + Retry-After + it) with its time,
    and while a stack loads, `up`'s stage and bar on top. Piped: one line per step. The block goes
    when the switch ends: its summary says the same."""

    transient = True

    def __init__(self, alias: str, quiet: bool = False, **display: Any) -> None:
        super().__init__(quiet=quiet, **display)  # stream=, tty=
        self.alias, self.began, self.loading, self._told = alias, time.time(), False, ""
        self.steps: list[tuple[str, float]] = []  # each step told (`weights 1/4 … 4/4` one), when

    def phase(self, name: str, t: float) -> None:
        self.loading = True  # a stack starts: its stages come from `up`
        super().phase(name, t)

    def told(self, stage: str) -> None:
        with self._lock:
            now = time.time()
            self.loading &= stage in (self.tracker.summary(), "preflight", "starting", "created")
            label = re.sub(r" \d+/\d+$", "", stage)
            if not self.steps or self.steps[-1][0] != label:
                self.steps.append((label, now))
                if not self.tty:
                    self._print(f"[{now - self.began:7.1f}s] {label}")
            self._told = stage
            self._draw(force=True)

    def _say(self, now: float, changed: bool) -> None:
        if not changed:  # the stages are the steps told; the heartbeat says where a load is
            super()._say(now, changed)

    def lines(self, now: float, width: int) -> list[str]:
        label, at = self.steps[-1] if self.steps else ("…", self.began)
        ends = [t for _, t in self.steps[1:]]
        done = [f"{a} {clock(t1 - t0)}" for (a, t0), t1 in zip(self.steps, ends, strict=False)]
        head = f"▸ {label} {clock(now - at)}"  # while a stack loads: `up`'s stage and bar
        last = self.tracker.last_line if self.loading else ""
        return [
            cut(line, width)
            for line in (
                block_lines(self.tracker, now, width)[0] if self.loading else head,
                f"  elapsed {clock(now - self.began)} · {self.alias} answers 503 + Retry-After: {self._told}",
                (fold_stages(done, width, rows=1) or [""])[0],
                f"  │ {last}" if last else "",
            )
        ]


def with_stages(report: UpReport, sink: ConsoleSink) -> UpReport:
    """The report with the stages the sink saw added to its phases (`up --json`, `wait --json`)."""
    report.phases = [*report.phases, *sink.phases()]
    return report


def _render(lines: list[str]) -> Group:
    from rich.console import Group
    from rich.text import Text

    return Group(
        *(Text(_shown(line), no_wrap=True, overflow="ellipsis", end="\n") for line in lines)
    )


def _shown(text: str) -> str:
    """Log lines and notes quote the container and the server: their colours (CSI sequences, vLLM's
    own) are dropped, and anything else a terminal would act on is shown escaped (output.inert)."""
    return (
        inert(stages.ANSI_CSI.sub("", text)) if "\x1b" in text or not text.isprintable() else text
    )
