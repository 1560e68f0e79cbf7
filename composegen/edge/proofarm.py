"""Proof for a profile without taking stacks down by hand (issue 37's `qualify --emulate`, issue 40
#4): `composegen qualify NAME [--emulate] [--alias ALIAS --then restore|promote]`.

`qualify_here`: NAME's running stack qualified as `qualify` always did; with `--emulate` a stack
that is not up is started emulated for it (sleep mode when its profile has `standby:`) and taken
down again afterwards (Ctrl-C too): the machine is left as it was found. Not when an edge alias
points at NAME: its clients would get the emulator's answers (`--alias` is the way).

`prove`: NAME qualified while ALIAS is served by another stack of the edge. The alias answers
503 + Retry-After + the stage throughout (the switch's own marking: StageSink, routes.json, its
journal, so `edge recover` undoes a killed run as it undoes a killed switch). Two paths:

    standby (both profiles have `standby:`): the serving engine is put to sleep, not downed; NAME
            woken (up and asleep) or started beside it; qualified; then NAME back to sleep (or down,
            when it was started here) and the old engine woken, warm-up, gates.
    cold    the serving stack down, NAME up, qualified; then NAME down and the old stack up, gates.

`--then promote` with a passing qualification moves the alias to NAME instead of restoring, with
the bundle just written as its proof (as `promote --run` checks it). Any failure (recording the
proof too, or a bug), Ctrl-C, SIGTERM, and a qualification that does not pass restore the old stack
and the alias (edge/proofsteps.py: as it ran, emulated or real; NAME as it was found). A restore
that fails after the qualification ran keeps the verdict (ProofReport.restore_failed, exit 3).
NAME already serving the alias, or up and awake beside its stack, is qualified where it runs:
nothing is marked.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import Literal

from composegen import privatestate
from composegen.edge import asleep, config, journal, routes, standbyplan, undo
from composegen.edge import evidence as proof
from composegen.edge.config import Edge
from composegen.edge.proofsteps import Arm, PathKind, State, qualified
from composegen.edge.reports import ProofReport, StepTime
from composegen.errors import BadInput
from composegen.evidence.reports.qualify import QualifyResult
from composegen.profiles.resolved import Resolved
from composegen.project import Project
from composegen.stack import driver

Then = Literal["restore", "promote"]


def qualify_here(
    project: Project, r: Resolved, emulate: bool, sleep_cycles: int, note: Callable[[str], None]
) -> QualifyResult:
    """`qualify NAME [--emulate]` (the module's docstring); NOTE tells the operator what it does."""
    h = driver.handles(project, (), {r.name: r}, r.name).get(r.name)  # listed, asked once
    started = emulate and h is None
    if not started and h is not None and h.asleep is not None:
        how = f"`composegen qualify {r.name} --alias ALIAS`"
        hint = f"{how} qualifies it in the serving stack's place, then restores it"
        raise BadInput(f"{r.name} is asleep: its engine serves nothing to qualify", hint=hint)
    if started:
        _refuse_aliased(project, r.name)
        standbyplan.check_start(project, r, True, False)  # it must fit beside the edge's stacks
        note(f"{r.name} is not up: starting it emulated for this qualification")
    try:
        if started:
            driver.up(project, r, driver.UpOptions(emulate=True, down_on_failure=True))
        if not sleep_cycles:
            return qualified(project, r, 0, None)
        # the cycles sleep it: the switch's lock, an alias on it marked first (edge/asleep.py)
        with asleep.sleeping(project, r, "qualify"):
            return qualified(project, r, sleep_cycles, None)
    finally:
        if started:  # Ctrl-C during `up`'s wait included: left as found
            note(f"taking {r.name} down again (it was not up before)")
            driver.down(project, r)


def _refuse_aliased(project: Project, name: str) -> None:
    """An emulated NAME where an edge alias points would answer real clients with a test double."""
    if not config.configured(project):
        return
    edge = config.load(project)
    on = [a for a, p in routes.aliases(project, edge).items() if p == name]
    if on:
        raise BadInput(
            f"--emulate: {name} is down and {', '.join(on)} points at it: started emulated, the "
            "edge would send its clients the emulator's answers",
            hint=f"`composegen up {name}` (the real engine the alias expects), then qualify it; "
            f"or, with the alias on another stack, `composegen qualify {name} --alias ALIAS "
            "--emulate` (the alias answers 503 meanwhile)",
        )


def _state(project: Project, r: Resolved) -> State:
    h = driver.handles(project, [r.name], {r.name: r}, r.name).get(r.name)  # listed, asked once
    return "down" if h is None else "asleep" if h.asleep else "awake"


def _path(edge: Edge, current: str, target: str, was: State) -> tuple[PathKind, str]:
    missing = [n for n in (current, target) if edge.stacks[n].profile.standby is None]
    if missing:
        verb = "has" if len(missing) == 1 else "have"
        return "cold", f"{' and '.join(missing)} {verb} no `standby:`: down, up"
    how = "(resident) woken" if was == "asleep" else "started beside it"
    return "standby", f"{current} is put to sleep, {target} {how}"


def prove(
    project: Project,
    edge: Edge,
    name: str,
    alias: str,
    *,
    then: Then = "restore",
    emulate: bool = False,
    sleep_cycles: int = 0,
    gates: list[str] | None = None,
) -> ProofReport:
    """NAME qualified in the place of ALIAS's serving stack (the module's docstring)."""
    if name not in edge.stacks:
        msg = f"{name}: not one of the edge's stacks ({', '.join(edge.stacks)}); see edge.yaml"
        raise BadInput(msg)
    started = time.monotonic()
    with privatestate.profile_lock(project, "edge-switch"):
        undo.refuse_interrupted(project)
        current = routes.current(project, edge, alias)
        if current is None:
            known = ", ".join(a for a in routes.aliases(project, edge)) or "none"
            raise BadInput(f"--alias: no alias {alias!r} (aliases: {known})")
        driver.engine_info()  # the engine answers, or nothing changes
        was = _state(project, edge.stacks[name])
        if current == name or was == "awake":
            return _in_place(project, edge, name, alias, current, then, sleep_cycles, started)
        path, why = _path(edge, current, name, was)
        arm = _begin(project, edge, alias, current, name, emulate, path, was)
        evidence: routes.Proof | None = None
        try:  # from the first mark to the move or the restore: nothing leaves the alias marked
            result = arm.away(sleep_cycles, gates)
            if then == "promote" and result.qualified:
                evidence = proof.qualified_run(project, edge.stacks[name], result.run)
                routes.record(project, edge, alias, name, "promote", evidence)
        except BaseException as exc:  # a bug, Ctrl-C or SIGTERM restores too
            raise arm.failed(exc) from None
        verdict = f"{'qualified' if result.qualified else 'not qualified'}, bundle {result.run}"
        trouble = None if evidence else arm.restore(verdict)
        if trouble is None:
            routes.publish(project, edge)
            journal.end(project)
    serving, sink = (current, routes.current(project, edge, alias) or current), arm.sink
    report = _report(
        alias, name, serving, then, result, evidence, (path, why), sink.done, started, sink.seen
    )
    return report.model_copy(update={"restore_failed": trouble.message if trouble else None})


def _in_place(
    project: Project,
    edge: Edge,
    name: str,
    alias: str,
    current: str,
    then: Then,
    cycles: int,
    started: float,
) -> ProofReport:
    """NAME serves the alias already, or runs awake beside its stack: qualified where it runs, the
    alias untouched (--then promote and a pass move it: NAME serves already, its gates passed)."""
    r = edge.stacks[name]
    with asleep.marked(project, edge, r, "qualify") if cycles else nullcontext():
        result = qualified(project, edge.stacks[name], cycles, None)  # the lock is held
    evidence, why = None, f"{alias} already serves {name}: qualified in place"
    if current != name:
        why = f"{name} is up and awake beside {current}: qualified where it runs"
        if then == "promote" and result.qualified:
            evidence = proof.qualified_run(project, edge.stacks[name], result.run)
            routes.record(project, edge, alias, name, "promote", evidence)
            routes.publish(project, edge)
    now = routes.current(project, edge, alias) or current
    return _report(
        alias, name, (current, now), then, result, evidence, ("unchanged", why), [], started
    )


def _begin(
    project: Project,
    edge: Edge,
    alias: str,
    current: str,
    name: str,
    emulate: bool,
    path: PathKind,
    was: State,
) -> Arm:
    """The memory plan (refused, exit 2, before the alias is marked), the journal with how CURRENT
    runs and NAME was found (what a restore or `edge recover` puts back), the first mark."""
    if path == "standby":  # NAME woken or started: either way awake beside CURRENT asleep
        standbyplan.check_switch(project, edge, current, name, emulate)
    ctr = driver.head_container(project, edge.stacks[current])
    # not running: brought back as --emulate says (a restart of what is not up changes nothing)
    emulated = bool(ctr.emulated) if ctr is not None and ctr.running else emulate
    entry = journal.begin(project, alias, current, name, "qualify", emulate, path, emulated, was)
    sink = undo.StageSink(project, edge, alias, name, entry)
    sink.serving = current
    return Arm(project, edge, alias, current, name, emulate, sink, path, was, emulated)


def _report(
    alias: str,
    name: str,
    serving: tuple[str, str],
    then: Then,
    result: QualifyResult,
    evidence: routes.Proof | None,
    path: tuple[PathKind, str],
    steps: list[tuple[str, float]],
    started: float,
    stages: list[str] | None = None,
) -> ProofReport:
    """SERVING: the alias's stack before and after; PATH: the path and why."""
    return ProofReport(
        alias=alias,
        profile=name,
        serving_before=serving[0],
        serving_after=serving[1],
        then=then,
        qualified=result.qualified,
        qualify=result,
        evidence=evidence,
        path=path[0],
        path_reason=path[1],
        stages=stages or [],
        steps=[StepTime(step=s, seconds=t) for s, t in steps],
        seconds=round(time.monotonic() - started, 1),
    )
