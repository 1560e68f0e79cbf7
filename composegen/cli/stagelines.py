"""The lines of the progress display: a stage's bar and amounts, the time and its estimate, the
stages done, folded and cut to the terminal's width."""

from __future__ import annotations

from composegen.evidence.estimate import earlier_load
from composegen.project import Project
from composegen.stack import driver
from composegen.units import format_bytes
from composegen.vllm import stages

HEIGHT = 4  # lines of the live block: stage + bar, time, stages done, the engine's last line


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


def estimate(
    tracker: stages.StageTracker, project: Project, name: str, emulate: bool | None = None
) -> None:
    """The "ready in ≈ N min" estimate from an earlier start in runs/: a warm one when a start filled
    the profile's cache volume (of EMULATE's kind; None: either), else a cold one."""
    warm = driver.filled(project, name, emulate)
    tracker.estimate_s = earlier_load(project.root, name, warm)
    tracker.estimate_of = "a warm start" if warm else "a cold start"


def estimate_text(tracker: stages.StageTracker, now: float) -> str:
    """` · ready in ≈ 12 min (estimate, a cold start)` from an earlier start of the profile; empty
    without one, or once over."""
    ready = tracker.current is not None and tracker.current.key == "ready"
    if tracker.estimate_s is None or tracker.failed or ready:
        return ""
    left = tracker.estimate_s - (now - tracker.started_at)
    said = f"(estimate, {tracker.estimate_of})"
    if left <= 0:
        return f" · past the earlier start's {max(1, round(tracker.estimate_s / 60))} min {said}"
    return f" · ready in ≈ {'<1' if left < 60 else round(left / 60)} min {said}"


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
    return text + _timing(tracker, now)


def _timing(tracker: stages.StageTracker, now: float) -> str:
    left = tracker.time_left(now)
    return estimate_text(tracker, now) + (
        f" · {clock(left)} left of startup_timeout" if left is not None else ""
    )


def block_lines(tracker: stages.StageTracker, now: float, width: int) -> list[str]:
    """The live block: HEIGHT lines, each at most `width` characters."""
    rows = tracker.view(now)
    active = next((r for r in rows if r["active"]), None)
    if tracker.failed:
        head = f"✗ failed: {tracker.failed}"
    elif active is None:
        ready = tracker.current is not None and tracker.current.key == "ready"
        said = tracker.stages["ready"].first_at if ready else now  # when the engine said so
        head = f"✓ ready in {clock(said - tracker.started_at)}" if ready else "… starting"
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
    timing = f"  elapsed {clock(now - tracker.started_at)}{_timing(tracker, now)}"
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


def cut(text: str, width: int) -> str:
    """At most `width` characters (an ellipsis marks the cut): a line that fits never wraps."""
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"
