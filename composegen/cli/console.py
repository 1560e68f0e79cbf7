"""Progress of a starting stack on stderr, and the ready summary.

On a terminal: one block of fixed height (rich Live), every line cut to the terminal's width, so it
never wraps and redraws in place at any width from 40 columns. Elsewhere (CI logs, pipes): one line
per stage change and a heartbeat line every HEARTBEAT_S, even when the engine says nothing.

`ConsoleSink` is a stack.progress.ProgressSink: the stack reports checks, phases, log lines and pull
events; the sink keeps a stages.StageTracker and draws it. Use it as a context manager (the live
block is stopped however the wait ends).
"""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING, Any, TextIO

from composegen.evidence.estimate import earlier_load
from composegen.output import inert, mask
from composegen.project import Project
from composegen.stack.progress import LogLine, ProgressSink, PullEvent
from composegen.stack.reports import Check, PhaseTime, UpReport
from composegen.units import format_bytes, format_gib
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
REDRAW_S = 0.25
HEIGHT = 4  # lines of the live block: stage + bar, time, stages done, the engine's last line
_MARK = {"ok": "ok  ", "warn": "warn", "fail": "FAIL"}


def clock(seconds: float | None) -> str:
    """`0:42`, `12:05`, `1:02:09`; `?` when unknown."""
    if seconds is None:
        return "?"
    s = max(0, round(seconds))
    h, rest = divmod(s, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


def _amount(n: float, unit: str) -> str:
    return format_bytes(n) if unit == "B" else f"{n:g}"


def progress_text(row: stages.StageRow) -> str:
    """`3/8 shards 37% · 1.20 shards/s · ETA 0:04` for a stage row from StageTracker.view (no
    bar)."""
    parts = []
    if row["done"] is not None and row["total"]:
        unit = row["unit"]
        counted = f"{_amount(row['done'], unit)}/{_amount(row['total'], unit)}"
        parts.append(f"{counted}{'' if unit == 'B' else ' ' + unit} {row['percent']:.0f}%")
    if row["rate"]:
        unit = row["unit"] or "it"
        parts.append(
            f"{format_bytes(row['rate'])}/s" if unit == "B" else f"{row['rate']:.2f} {unit}/s"
        )
    if row["eta_s"] is not None:
        parts.append(f"ETA {clock(row['eta_s'])}")
    return " · ".join(parts)


def earlier_load_s(project: Project, name: str) -> float | None:
    """An earlier start's load time from runs/ (evidence/estimate.py), for the "ready in ≈ N min"
    estimate."""
    earlier = earlier_load(project.root, name)
    return earlier.seconds if earlier else None


def estimate_text(tracker: stages.StageTracker, now: float) -> str:
    """` · ready in ≈ 12 min (estimate)` from an earlier start of the profile; empty without one, or
    once over."""
    current = tracker.current
    if (
        tracker.estimate_s is None
        or tracker.failed
        or (current is not None and current.key == "ready")
    ):
        return ""
    left = tracker.estimate_s - (now - tracker.started_at)
    if left <= 0:
        return (
            f" · past the earlier start's {max(1, round(tracker.estimate_s / 60))} min (estimate)"
        )
    return f" · ready in ≈ {'<1' if left < 60 else round(left / 60)} min (estimate)"


def status_line(tracker: stages.StageTracker, now: float) -> str:
    """One line for logs: `loading weights 3/8 shards 37% · ETA 0:04 · 21:10 left of
    startup_timeout`."""
    rows = tracker.view(now)
    active = next((r for r in rows if r["active"]), rows[-1] if rows else None)
    text = (
        tracker.summary()
        if active is None
        else " ".join(filter(None, [active["label"], progress_text(active)]))
    )
    left = tracker.time_left(now)
    return (
        text
        + estimate_text(tracker, now)
        + (f" · {clock(left)} left of startup_timeout" if left is not None else "")
    )


def block_lines(tracker: stages.StageTracker, now: float, width: int) -> list[str]:
    """The live block: HEIGHT lines, each at most `width` characters."""
    rows = tracker.view(now)
    active = next((r for r in rows if r["active"]), None)
    if tracker.failed:
        head = f"✗ failed: {tracker.failed}"
    elif active is None:
        ready = tracker.current is not None and tracker.current.key == "ready"
        head = f"✓ ready in {clock(now - tracker.started_at)}" if ready else "… starting"
    else:
        stats = progress_text(active)
        detail = f" ({active['detail']})" if active["detail"] else ""
        # the numbers matter more than the detail
        if len(active["label"]) + len(detail) + len(stats) + 9 > width:
            detail = ""
        head = f"▸ {active['label']}{detail} {clock(active['elapsed_s'])}"
        bar = min(30, width - len(head) - len(stats) - 3)
        if active["percent"] is not None and bar >= 8:
            filled = int(bar * active["percent"] / 100)
            head += " " + "━" * filled + ("╺" + "─" * (bar - filled - 1) if filled < bar else "")
        head = f"{head} {stats}" if stats else head
    left = tracker.time_left(now)
    timing = f"  elapsed {clock(now - tracker.started_at)}{estimate_text(tracker, now)}" + (
        f" · {clock(left)} left of startup_timeout" if left is not None else ""
    )
    done = [
        f"{r['label']} {clock(r['elapsed_s'])}"
        for r in rows
        if not r["active"] and r["stage"] != "ready"
    ]
    last = tracker.last_line or ""
    folded = fold_stages(done, width, rows=1)
    # over: the stages matter more than the last line
    if active is None and len(fold_stages(done, width, rows=2)) == 2:
        return [cut(line, width) for line in (head, timing, *fold_stages(done, width, rows=2))]
    lines = [head, timing, folded[0] if folded else "", f"  │ {last}" if last else ""]
    return [cut(line, width) for line in lines]


def fold_stages(done: list[str], width: int, rows: int) -> list[str]:
    """The finished stages as at most `rows` lines of whole `label time` items, none over `width`:
    folded at the separators, and when they still do not fit, the oldest are elided with a count
    (`+3 earlier`), because the latest stages matter most. One item wider than a line is cut (the
    last resort)."""
    for dropped in range(len(done) + 1):
        items = ([f"+{dropped} earlier"] if dropped else []) + done[dropped:]
        lines: list[str] = []
        for item in items:
            if lines and len(lines[-1]) + 3 + len(item) <= width:
                lines[-1] += " · " + item
            else:
                lines.append(("  ✓ " if not lines else "    ") + item)
        if len(lines) <= rows and all(len(line) <= width for line in lines):
            return lines
    return [cut(f"  ✓ +{len(done)} earlier", width)] if done else []


def fold(text: str, width: int) -> str:
    """TEXT folded at words to WIDTH, its continuation lines indented under the first."""
    import textwrap

    return textwrap.fill(text, width, subsequent_indent="    ", break_on_hyphens=False)


def cut(text: str, width: int) -> str:
    """At most `width` characters (an ellipsis marks the cut): a line that fits never wraps."""
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


class ConsoleSink(ProgressSink):
    """Tracks the stages of one start and draws them (nothing when `quiet`: `--json` still gets the
    phases)."""

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
            line = cut(line, width) if check.status == "ok" else fold(line, width)
        self._print(line)

    def phase(self, name: str, t: float) -> None:
        current = self.tracker.current
        # compose up (t = 0), or attaching to a start t seconds old: timeouts count from it
        if name == "starting":
            self.tracker.started_at = time.time() - t
            if t < 1.0 and (current is None or current.key == "pull"):
                self.tracker.begin("create", time.time())
        # the container started: Python's imports run before vLLM's first line
        elif name == "running":
            self.tracker.launched(time.time())
        elif name in ("health 200", "models ready"):
            # The engine logged `Application startup complete.` before it answered, but that line
            # may still be
            # on its way from the log follower: ready is reached from the log, or at close() at the
            # latest.
            self._answering = True
        self._changed()

    def log_line(self, line: LogLine) -> None:
        if line.node is not None and self._head is None and stages.is_api_server_line(line.text):
            self._head = line.node  # a multi-node stack: the node with the API server is the head
        if self._head is not None and line.node != self._head:
            return  # the workers load their shards too: the stages are the head's
        if self.tracker.feed(
            line.text, line.timestamp if line.timestamp is not None else time.time()
        ):
            self._changed()

    def pull(self, event: PullEvent) -> None:
        """Bytes of the layers the engine downloads (a layer already present counts nothing)."""
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
        self._draw(force=False)

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
            if current is not None and current.entered_at is not None and not self.tracker.failed:
                # when the engine logged it (`wait` replays what came before)
                at = current.entered_at
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
        live.update(_render(block_lines(self.tracker, now, width)), refresh=True)

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
                transient=False,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self._live.start()
        return self._live

    def close(self) -> None:
        """Draw the last state and stop the live block (it stays on screen)."""
        current = self.tracker.current
        if self._answering and (current is None or current.key != "ready"):
            self.tracker.begin("ready", time.time())
            self._changed()
        if self._live is not None:
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


def console_progress(
    quiet: bool = False, timeout_s: float | None = None, verbose: bool = False
) -> ConsoleSink:
    return ConsoleSink(timeout_s=timeout_s, quiet=quiet, verbose=verbose)


def _said_by_preflight(warning: str, result: UpReport) -> bool:
    """A clamped ulimit is the preflight `ulimits` warning again: said once per `up`."""
    warned = [c.name for c in result.checks if c.status == "warn"]
    # NODE: ulimit
    about_ulimit = warning.startswith("ulimit ") or warning.split(": ", 1)[-1].startswith("ulimit ")
    return about_ulimit and any(n.endswith("ulimits") for n in warned)


def summary_text(result: UpReport, width: int | None = None) -> str:
    """What `up` and `wait` print when the stack is ready; warnings folded at words under `width` (a
    terminal)."""
    s = result.startup.to_json() if result.startup else {}  # the startup report's fields by name
    gib = lambda v: format_gib(v) if isinstance(v, (int, float)) else "n/a"  # noqa: E731
    per_rank = ", ".join(f"{v:.2f}" for v in s.get("kv_cache_gib_per_rank") or []) or "n/a"
    latency = result.detection_latency_s if result.detection_latency_s is not None else "n/a"
    lines = [
        f"{result.name} is ready at {result.endpoint}"
        + (" (EMULATED vLLM)" if result.emulated else ""),
        f"  time to ready       {result.time_to_ready_s:.1f} s "
        + (
            "(from its log: it was ready before this command)"
            if result.ready_before
            else f"(seen {latency} s after the engine said so)"
        ),
        f"  KV cache            {s.get('kv_cache_tokens') if s.get('kv_cache_tokens') is not None else 'n/a':,} tokens"
        if isinstance(s.get("kv_cache_tokens"), int)
        else "  KV cache            n/a",
        f"  max concurrency     {s.get('max_concurrency')}x at {s.get('max_model_len')} tokens",
        f"  KV GiB per rank     {per_rank} (min {gib(s.get('kv_cache_gib_min'))})",
        f"  weights             {gib(s.get('weights_gib'))}",
        f"  peak activation     {gib(s.get('peak_activation_gib'))}",
    ]
    for m in s.get("mismatches") or []:
        lines.append(f"  MISMATCH  {m['flag']}: profile {m['profile']!r}, engine {m['engine']!r}")
    # the startup log's own (a cut args line, …)
    for w in [*result.warnings, *(s.get("warnings") or [])]:
        if _said_by_preflight(w, result):
            continue
        if width:
            import textwrap

            lines.append(
                textwrap.fill(f"warning: {w}", width, initial_indent="  ", subsequent_indent="    ")
            )
        else:
            lines.append(f"  warning: {w}")
    return "\n".join(lines) + "\n"
