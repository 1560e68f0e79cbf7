"""A switch's journal: .composegen/edge/switch.json, written before the alias leaves its stack,
rewritten at every step, removed when the switch ends (moved, or rolled back). It names the
composegen that runs it by pid and that process's start time (a pid alone can be reused by an
unrelated process after a kill -9).

A journal whose owner is gone is a switch interrupted: routes.json still says 503 + the step it died
in. `composegen edge recover` (switch.recover) undoes it — the alias stays where assignments.json
says, its stack is brought back up — or, when the alias had already moved, only clears the marks.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TypedDict

from composegen import privatestate
from composegen.edge.keys import edge_dir
from composegen.edge.procstart import start_ticks
from composegen.project import Project

PID_MAX = 1 << 22  # Linux's highest pid_max: a larger one names no process (and overflows a C long)


class Journal(TypedDict):
    alias: str
    source: str | None  # the stack the alias pointed at when the switch began
    target: str
    by: str  # promote | rollback | qualify (`qualify --alias`) | sleep | wake | campaign (asleep.py)
    emulate: bool
    path: str  # standby | cold
    # what recovery restores: the source as it ran (emulated or real), the target as it was found
    source_emulated: bool
    target_was: str  # down | asleep | awake
    step: str  # what clients were told last
    pid: int
    started: str  # the owner's start time (/proc/PID/stat field 22), "" where /proc has none
    since: str


def journal_path(project: Project) -> Path:
    return edge_dir(project) / "switch.json"


def _start_time(pid: int) -> str:
    ticks = start_ticks(pid)
    return "" if ticks is None else str(ticks)


def begin(
    project: Project,
    alias: str,
    source: str | None,
    target: str,
    by: str,
    emulate: bool,
    path: str,
    source_emulated: bool | None = None,
    target_was: str | None = None,
) -> Journal:
    """A switch's defaults: the source restored as --emulate says, the target found down (cold) or
    asleep (standby)."""
    pid = os.getpid()
    entry = Journal(
        alias=alias,
        source=source,
        target=target,
        by=by,
        emulate=emulate,
        path=path,
        source_emulated=emulate if source_emulated is None else source_emulated,
        target_was=target_was or _target_was(path),
        step="checking the engine",
        pid=pid,
        started=_start_time(pid),
        since=privatestate.stamp(),
    )
    privatestate.write_json(journal_path(project), entry)
    return entry


def _target_was(path: str) -> str:
    return "asleep" if path == "standby" else "down"


def step(project: Project, entry: Journal, text: str) -> None:
    entry["step"] = text
    privatestate.write_json(journal_path(project), entry)


def end(project: Project) -> None:
    journal_path(project).unlink(missing_ok=True)


def read(project: Project) -> Journal | None:
    """The journal, or None when there is none or it is not a record composegen wrote."""
    doc: dict = privatestate.read_json(journal_path(project), {})
    shapes: dict = {"pid": int, "emulate": bool}
    shapes.update(dict.fromkeys(("alias", "target", "by", "path", "step", "started", "since"), str))
    if not all(isinstance(doc.get(k), t) for k, t in shapes.items()):
        return None
    bad_pid = isinstance(doc["pid"], bool) or not 0 < doc["pid"] <= PID_MAX
    if bad_pid or not isinstance(doc.get("source"), str | None):
        return None
    # a journal written before these two were kept: a switch's defaults
    if not isinstance(doc.get("source_emulated"), bool):
        doc["source_emulated"] = doc["emulate"]
    if doc.get("target_was") not in ("down", "asleep", "awake"):
        doc["target_was"] = _target_was(doc["path"])
    return Journal(**{k: doc[k] for k in Journal.__annotations__})  # type: ignore[typeddict-item]


def owner_alive(entry: Journal) -> bool:
    pid = entry["pid"]
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, someone else's
    return not entry["started"] or _start_time(pid) == entry["started"]


def holding(entry: Journal) -> bool:
    """A live campaign keeps its target asleep (edge/asleep.py `held`): not an interrupted one."""
    return entry["by"] == "campaign" and owner_alive(entry)


def interrupted(project: Project) -> Journal | None:
    """The journal of a switch whose composegen is gone, if there is one."""
    entry = read(project)
    return entry if entry is not None and not owner_alive(entry) else None


def interrupted_stage(entry: Journal) -> str:
    """What clients and `edge status` are told about it: composegen's words, no error text."""
    return (
        f"switch to {entry['target']} interrupted at: {entry['step']}"[:160]
        + "; run composegen edge recover"
    )
