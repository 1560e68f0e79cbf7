"""`composegen edge recover`: undo a switch or a `qualify --alias` whose composegen was killed (its
journal: edge/journal.py).

The alias keeps the stack assignments.json names (a switch records its move only after the gates
pass). The target is left as the journal says it was found: down (stopped), asleep (back to sleep)
or awake (left). The serving stack comes back as it ran (emulated or real, the journal says): a cold
run's is brought back (started, followed if still starting, or left if it serves); a standby run's
engine is woken, warmed up and checked to be itself; then its gates. Either way the dead
composegen's own compose commands are waited for first (they go on after a kill -9), and the 503
marks are cleared. A switch that had already recorded its move only has its marks cleared.

`put_back` is that undo, shared with `qualify --alias` (edge/proofsteps.py) restoring after a
failure or a qualification.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass

from composegen import privatestate
from composegen.edge import journal, routes, standby, switch
from composegen.edge.config import Edge
from composegen.edge.reports import RecoverReport
from composegen.errors import ComposegenError
from composegen.evidence import gatecheck, sleepcycles
from composegen.project import Project
from composegen.stack import driver
from composegen.stack.progress import ProgressSink


@dataclass(frozen=True)
class Undo:
    """What to put back: TARGET as it was found, SERVING serving again, as it ran."""

    serving: str
    target: str
    path: str  # standby: SERVING was put to sleep (woken); cold: it was downed (brought back)
    target_was: str  # down | asleep | awake
    emulated: bool  # SERVING ran emulated (restarted so: never a real stack swapped for a double)


def put_back(
    project: Project,
    edge: Edge,
    undo: Undo,
    sink: ProgressSink,
    run: Callable[[str, Callable[[], object]], None],
) -> None:
    """UNDO done, each step through RUN (told and timed); raises what failed."""
    new = edge.stacks.get(undo.target)
    if new is not None and undo.target_was == "asleep":
        with contextlib.suppress(ComposegenError):  # its engine may be what failed
            run(f"putting {undo.target} to sleep",
                lambda: driver.sleep_stack(project, new, mode="abort"))  # fmt: skip
    elif new is not None and undo.target_was == "down":
        run(f"stopping {undo.target}", lambda: driver.down(project, new))
    old = edge.stacks[undo.serving]
    if undo.path == "standby":
        run(f"waking {undo.serving}", lambda: driver.wake_stack(project, old))
        run("warm-up", lambda: sleepcycles.probe(old))  # the first request after a wake
        run("identity", lambda: standby.identity(old))
    else:
        how = driver.UpOptions(emulate=undo.emulated, render_stale=False)
        run(f"starting {undo.serving}", lambda: driver.up_or_attach(project, old, how, sink))
    run(f"gates on {undo.serving}", lambda: gatecheck.require_gates(old, None))


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
        else:
            was = entry["target_was"]
            undo = Undo(serving, target, entry["path"], was, entry["source_emulated"])
            put_back(project, edge, undo, sink, standby.Steps(sink.say).run)
            left = {"down": "stopped", "asleep": "asleep"}.get(was, "left awake")
            action = f"undone: {target} {left}, {serving} serving again"
        routes.publish(project, edge)
        journal.end(project)
    return RecoverReport(alias=alias, action=action, profile=serving, stages=sink.seen,
                         seconds=round(time.monotonic() - started, 1))  # fmt: skip
