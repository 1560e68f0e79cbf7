"""`composegen edge recover`: undo a switch whose composegen was killed (its journal:
edge/journal.py).

The alias keeps the stack assignments.json names (a switch records its move only after the gates
pass). A cold switch: the other stack is stopped and that one brought back (started, followed if
still starting, or left if it serves), gates. A standby switch: the target back to sleep, the
serving engine woken, gates. Either way the dead composegen's own compose commands are waited for
first (they go on after a kill -9), and the 503 marks are cleared. A switch that had already
recorded its move only has its marks cleared.
"""

from __future__ import annotations

import contextlib
import time

from composegen import privatestate
from composegen.edge import journal, routes, switch
from composegen.edge.config import Edge
from composegen.edge.reports import RecoverReport
from composegen.errors import ComposegenError
from composegen.evidence import gatecheck
from composegen.project import Project
from composegen.stack import driver


def recover(project: Project, edge: Edge) -> RecoverReport:
    """Undo the switch whose composegen is gone (the module's docstring says how); waits for a live
    one."""
    # a live switch holds it: recover waits for it
    with privatestate.profile_lock(project, "edge-switch"):
        entry = journal.read(project)
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
        sink = switch.StageSink(project, edge, alias, serving or target, None)
        sink.prefix = "recovering an interrupted switch: "
        if serving == target or serving is None:
            action = "the switch had moved the alias; marks cleared"
        # both resident: the target back to sleep, the serving one awake
        elif entry["path"] == "standby":
            with contextlib.suppress(ComposegenError):
                sink.say(f"putting {target} to sleep")
                driver.sleep_stack(project, edge.stacks[target], mode="abort")
            sink.say(f"waking {serving}")
            driver.wake_stack(project, edge.stacks[serving])
            sink.say(f"gates on {serving}")
            gatecheck.require_gates(edge.stacks[serving], None)
            action = f"undone: {target} asleep, {serving} awake and serving again"
        else:
            if target in edge.stacks:
                sink.say(f"stopping {target}")
                driver.down(project, edge.stacks[target])
            switch.bring_back(project, edge, serving, entry["emulate"], sink)
            action = f"undone: {target} stopped, {serving} serving again"
        routes.publish(project, edge)
        journal.end(project)
    return RecoverReport(alias=alias, action=action, profile=serving, stages=sink.seen,
                         seconds=round(time.monotonic() - started, 1))  # fmt: skip
