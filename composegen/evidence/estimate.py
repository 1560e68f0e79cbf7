"""How long a profile's engine took to load the last time: the overall "ready in ≈ N min" estimate
`up` and `wait` show next to the per-stage ETA (labelled an estimate: it is an earlier start's time,
not a forecast).

`earlier_load(root, name, warm) -> seconds | None`: the newest run under root/runs whose evidence.json
names the profile (and, when WARM says, a warm or a cold engine start) and holds a startup.log with
engine timestamps; its load time is from the log's first timestamped line to the last one before
`Application startup complete.` (vLLM stamps to the second). Only files, never links, each read up
to a cap; a run that does not say is skipped, never an error.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

from composegen.vllm import stages

MAX_RUNS = 50  # the newest ones: an estimate never scans a large history
EVIDENCE_MAX = 1 << 20
LOG_MAX = 16 << 20
STAMP = re.compile(r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)")


def _read(path: Path, cap: int) -> str | None:
    if path.is_symlink() or not path.is_file():
        return None
    try:
        with open(path, "rb") as stream:
            return stream.read(cap).decode("utf-8", "replace")
    except OSError:
        return None


def load_seconds(log: str) -> float | None:
    """Seconds from the first stamped line to the last stamped one before ready; None when it never
    got ready."""
    first = last = None
    for line in log.splitlines():
        if stages.is_ready_line(line):
            break
        if m := STAMP.search(line):
            month, day, hour, minute, second = (int(g) for g in m.groups())
            try:
                when = datetime(2000, month, day, hour, minute, second)  # a leap year: 02-29 parses
            except ValueError:
                continue
            first = first or when
            last = when
    else:
        return None
    if first is None or last is None or last < first:
        return None
    return (last - first).total_seconds()


def earlier_load(root: Path, name: str, warm: bool | None = None) -> float | None:
    runs = Path(root) / "runs"
    if not runs.is_dir() or runs.is_symlink():
        return None
    for run in sorted(
        (p for p in runs.iterdir() if p.is_dir() and not p.is_symlink()), reverse=True
    )[:MAX_RUNS]:
        try:
            doc = json.loads(_read(run / "evidence.json", EVIDENCE_MAX) or "{}")
        except ValueError:
            continue
        doc = doc if isinstance(doc, dict) else {}
        profile, start = doc.get("profile"), doc.get("comparability")
        was_warm = isinstance(start, dict) and start.get("engine_start") in ("warm", "partial")
        mine = isinstance(profile, dict) and profile.get("name") == name
        if not mine or warm not in (None, was_warm):
            continue
        if seconds := load_seconds(_read(run / "startup.log", LOG_MAX) or ""):
            return seconds
    return None
