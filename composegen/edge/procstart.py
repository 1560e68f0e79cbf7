"""A process's start, as Linux /proc says it: one reading of /proc/PID/stat for the switch timeline's
origin (timeline.py) and the switch journal's owner check (journal.py). Stdlib only: both import it.
"""

from __future__ import annotations

from pathlib import Path


def start_ticks(pid: int | None = None) -> int | None:
    """When process PID (this one by default) started, in clock ticks since boot: /proc/PID/stat
    field 22. None where /proc does not say (no /proc, no such process, a stat it cannot read)."""
    try:
        stat = Path(f"/proc/{pid or 'self'}/stat").read_text(encoding="ascii", errors="replace")
        # field 22, counted after "pid (comm)": the command name may hold spaces and parentheses
        return int(stat.rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None
