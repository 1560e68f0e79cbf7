"""The shm reports as text for people: names escaped so they cannot forge lines or drive a terminal,
and the free-space and leftover warnings `up` shows."""

from __future__ import annotations

from typing import TYPE_CHECKING

from composegen.shm.patterns import CLASSES

# the models (pydantic) load only where a scan becomes one; `shm --json` never does
if TYPE_CHECKING:
    from composegen.shm.reports import ShmReclaim, ShmScan, Unreadable


def human_bytes(n: float) -> str:
    # why: ~20 ms of regexes; the JSON fast path never formats sizes
    from composegen.units import format_bytes

    return format_bytes(n)


def check_budget(scan_report: ShmScan, need_bytes: int, leftover_warn_bytes: int) -> list[str]:
    """Warnings for `up`: too little free shared memory for a profile, or too many leftovers."""
    fs, path, leftover = scan_report.filesystem, scan_report.path, scan_report.totals.leftover
    warnings = []
    if need_bytes > fs.total_bytes:
        warnings.append(
            f"{path} is {human_bytes(fs.total_bytes)} in total but the profile needs "
            f"{human_bytes(need_bytes)}; raise shm_size or the tmpfs size"
        )
    elif need_bytes > fs.free_bytes:
        freed = f"{leftover.count} leftovers would free {human_bytes(leftover.allocated_bytes)}"
        tip = f"; reclaiming {freed} (composegen shm reclaim)" if leftover.count else ""
        needs = f"the profile needs {human_bytes(need_bytes)}{tip}"
        warnings.append(f"{path} has {human_bytes(fs.free_bytes)} free but {needs}")
    if leftover.count and leftover.allocated_bytes > leftover_warn_bytes:
        warnings.append(
            f"{leftover.count} leftover files use {human_bytes(leftover.allocated_bytes)} "
            f"in {path} (over {human_bytes(leftover_warn_bytes)}); see composegen shm reclaim"
        )
    return warnings


def printable(name: str | None) -> str:
    """A name from the filesystem or /proc as text output shows it: control and format characters
    (newline, ESC, bidi overrides...), bytes that are not UTF-8 and the backslash itself escaped, so
    a name can neither forge lines nor drive the terminal. JSON keeps the name as it is."""
    if name is None:
        return "?"
    if name.isprintable() and "\\" not in name:
        return name
    return "".join(_escape(ch) for ch in name)


def _escape(ch: str) -> str:
    if ch == "\\":
        return "\\\\"
    if ch.isprintable():
        return ch
    code = ord(ch)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


def unreadable_lines(unreadable: list[Unreadable]) -> list[str]:
    if not unreadable:
        return []
    pids = ", ".join(f"{u.pid} ({printable(u.comm)}, uid {u.uid})" for u in unreadable)
    return [f"warning: holders unknown for {len(unreadable)} unreadable process(es): {pids}"]


def _fit(line: str, width: int | None) -> str:
    return line if width is None or len(line) <= width else line[: width - 1] + "…"


def format_text(report: ShmScan, width: int | None = None) -> str:
    """The entries, one row each. With `width` (a terminal's), a row too wide folds its HOLDERS onto
    lines of their own under it (one holder a line, cut to the width); piped (None), full rows."""
    lines = [f"{'CLASS':<9} {'ALLOC':>10} {'AGE':>5} {'OWNER':<8} {'KIND':<7} NAME  HOLDERS"]
    for e in report.entries:
        each = [
            f"{h.pid}/{printable(h.comm)} {'+'.join(h.how)}"
            + (f" [{h.compose_project or h.container_id[:12]}]" if h.container_id else "")
            for h in e.holders
        ]
        head = (
            f"{e.class_:<9} {human_bytes(e.allocated_bytes):>10} {_age(e.age_seconds):>5} "
            f"{(e.user or e.uid):<8} {e.kind:<7} {printable(e.name)}"
        )
        row = f"{head}  {'; '.join(each)}".rstrip()
        if width is None or len(row) <= width:
            lines.append(row)
        else:
            lines += [_fit(head, width), *(_fit(f"    held by {h}", width) for h in each)]
    fs, totals = report.filesystem, report.totals.by_class()
    counts = [(cls, totals[cls].count, human_bytes(totals[cls].allocated_bytes)) for cls in CLASSES]
    lines.append(", ".join(f"{cls}: {count} ({size})" for cls, count, size in counts))
    free = f"{human_bytes(fs.free_bytes)} free of {human_bytes(fs.total_bytes)}"
    lines.append(f"{printable(report.path)}: {free}")
    if report.container:
        c = report.container
        lines.append(f"container {printable(c.name)} ({c.id[:12]}), ipc {c.ipc_mode}")
    unreadable = [_fit(line, width) for line in unreadable_lines(report.unreadable_pids)]
    return "\n".join(lines + unreadable)


def format_after_down(report: ShmScan) -> str:
    """/dev/shm as `down` shows it: the table when the stop left something to reclaim (a leftover);
    else one line — no empty table, and no warning about processes this user cannot read (PID 1 in
    a container): they matter only when a leftover's holders are in question."""
    if report.totals.leftover.count:
        return format_text(report)
    fs, totals = report.filesystem, report.totals.by_class()
    others = [f"{cls} {totals[cls].count}" for cls in CLASSES if totals[cls].count]
    kept = f" ({', '.join(others)}: `composegen shm` lists them)" if others else ""
    free = f"{human_bytes(fs.free_bytes)} free of {human_bytes(fs.total_bytes)}"
    return f"{printable(report.path)}: nothing to reclaim{kept}; {free}"


def format_reclaim_text(result: ShmReclaim) -> str:
    name, size = printable, human_bytes
    fresh = sum(1 for s in result.skipped if s.reason.startswith("changed "))
    if not result.applied:
        lines = [f"would remove {name(c.name)} ({size(c.bytes)})" for c in result.candidates]
        lines.append(
            f"preview: {len(result.candidates)} files, {size(result.candidate_bytes)} "
            f"in {name(result.path)}; run again with --yes to remove them"
        )
    else:
        lines = [f"removed {name(r.name)} ({size(r.bytes)})" for r in result.removed]
        candidates = {c.name for c in result.candidates}  # skips decided at removal time
        kept = [s for s in result.skipped if s.name in candidates]
        lines += [f"kept {name(s.name)}: {s.reason}" for s in kept]
        lines.append(f"removed {len(result.removed)} files, freed {size(result.bytes_freed)}")
        if result.remaining:
            t = result.remaining.totals.by_class()
            lines.append("remaining: " + ", ".join(f"{cls} {t[cls].count}" for cls in CLASSES))
    if fresh:
        changed = f"changed less than --min-age {result.min_age_seconds:g}s ago"
        lines.append(f"left alone: {fresh} file(s) {changed}")
    return "\n".join(lines + unreadable_lines(result.unreadable_pids))
