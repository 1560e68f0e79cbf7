"""`composegen edge recover`: undo a switch, a `qualify --alias` or a sleep (edge/asleep.py) whose
composegen was killed (its journal: edge/journal.py). The alias keeps the stack assignments.json
names; the dead composegen's compose commands are waited for first (they go on after a kill -9); then
the undo of edge/undo.py (the target as it was found, the serving stack back as it ran, its gates)
and the 503 marks cleared. A switch that had already recorded its move only has its marks cleared.
"""

from __future__ import annotations

import time

from composegen import privatestate
from composegen.edge import journal, routes
from composegen.edge.config import Edge
from composegen.edge.reports import RecoverReport
from composegen.edge.undo import StageSink, Undo, put_back, refuse_interrupted
from composegen.project import Project
from composegen.stack import driver


def recover(project: Project, edge: Edge) -> RecoverReport:
    """Undo the switch whose composegen is gone (the module's docstring says how); waits for a live
    one."""
    # a live switch holds it: recover waits for it
    with privatestate.profile_lock(project, "edge-switch"):
        entry = journal.read(project)
        if entry is not None and journal.holding(entry):
            refuse_interrupted(project)  # a live campaign keeps it asleep: refused, saying whose
        if entry is None:
            routes.publish(project, edge)  # no journal: clear any mark left behind
            return RecoverReport(
                alias=None, action="nothing to recover", profile=None, stages=[], seconds=0.0
            )
        started = time.monotonic()
        alias, target = entry["alias"], entry["target"]
        serving = routes.current(project, edge, alias)
        # the dead composegen's compose children
        for name in {n for n in (target, serving) if n in edge.stacks}:
            driver.settle(project, edge.stacks[name])
        sink = StageSink(project, edge, alias, serving or target, None)
        sink.prefix = "recovering an interrupted switch: "
        # slept outside a switch (edge/asleep.py: the target its own source, found awake): woken
        asleep = serving == target and entry["target_was"] == "awake"
        if serving is None or (serving == target and not asleep):
            action = "the switch had moved the alias; marks cleared"
        else:
            was = entry["target_was"]
            undo = Undo(serving, target, entry["path"], was, entry["source_emulated"])
            put_back(project, edge, undo, sink)
            left = {"down": "stopped", "asleep": "asleep"}.get(was, "left awake")
            action = f"undone: {target} {left}, {serving} serving again"
            action = f"undone: {serving} woken, serving again" if asleep else action
        routes.publish(project, edge)
        journal.end(project)
    took, seen = round(time.monotonic() - started, 1), sink.seen
    return RecoverReport(alias=alias, action=action, profile=serving, stages=seen, seconds=took)
