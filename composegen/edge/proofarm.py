"""Proof for a profile without taking stacks down by hand (issue 37's `qualify --emulate`, issue 40
#4): `composegen qualify NAME [--emulate] [--alias ALIAS --then restore|promote]`.

`qualify_here`: NAME's running stack qualified as `qualify` always did; with `--emulate` a stack
that is not up is started emulated for it (sleep mode when its profile has `standby:`) and taken
down again afterwards: the machine is left as it was found.

`prove`: NAME qualified while ALIAS is served by another stack of the edge. The alias answers
503 + Retry-After + the stage throughout (the switch's own marking: StageSink, routes.json, its
journal, so `edge recover` undoes a killed run as it undoes a killed switch). Two paths:

    standby (both profiles have `standby:`): the serving engine is put to sleep, not downed; NAME
            woken (up and asleep) or started beside it; qualified; then NAME back to sleep (or down,
            when it was started here) and the old engine woken, warm-up, gates.
    cold    the serving stack down, NAME up, qualified; then NAME down and the old stack up, gates.

`--then promote` with a passing qualification moves the alias to NAME instead of restoring, with
the bundle just written as its proof (as `promote --run` checks it). Any failure, Ctrl-C, and a
qualification that does not pass restore the old stack and the alias. NAME already serving the
alias, or up and awake beside its stack, is qualified where it runs: nothing is marked.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from composegen import privatestate
from composegen.edge import evidence as proof
from composegen.edge import exposure, journal, routes, standby, standbyplan, switch
from composegen.edge.config import Edge
from composegen.edge.reports import ProofReport, StepTime
from composegen.errors import BadInput, CheckFailed, ComposegenError, EngineError, Interrupted
from composegen.evidence import capture, qualify, sleepcycles
from composegen.evidence.reports.qualify import QualifyResult
from composegen.profiles.resolved import Resolved
from composegen.project import Project
from composegen.stack import driver

Then = Literal["restore", "promote"]
PathKind = Literal["standby", "cold", "unchanged"]


def qualify_here(
    project: Project, r: Resolved, emulate: bool, sleep_cycles: int, note: Callable[[str], None]
) -> QualifyResult:
    """`qualify NAME [--emulate]` (the module's docstring); NOTE tells the operator what it does."""
    ctr = driver.head_container(project, r)
    started = emulate and (ctr is None or not ctr.running)
    if not started and r.profile.standby and driver.sleep_state(project, r) is not None:
        raise BadInput(f"{r.name} is asleep: its engine serves nothing to qualify",
                       hint=f"`composegen qualify {r.name} --alias ALIAS` qualifies it in the "
                            "serving stack's place, then restores it")  # fmt: skip
    if started:
        standby.plan_start(project, r, True, False)  # it must fit beside the edge's stacks
        note(f"{r.name} is not up: starting it emulated for this qualification")
        driver.up(project, r, driver.UpOptions(emulate=True, down_on_failure=True))
    try:
        return _qualified(project, r, sleep_cycles, None)
    finally:
        if started:
            note(f"taking {r.name} down again (it was not up before)")
            driver.down(project, r)


def _qualified(
    project: Project, r: Resolved, cycles: int, on_step: Callable[[str], None] | None
) -> QualifyResult:
    gate = exposure.gate_for(project, r)
    return qualify.qualify_stack(project, r, gate, sleep_cycles=cycles, on_step=on_step)


State = Literal["down", "asleep", "awake"]


def _state(project: Project, r: Resolved) -> State:
    ctr = driver.head_container(project, r)
    if ctr is None or not ctr.running:
        return "down"
    asleep = r.profile.standby and driver.sleep_state(project, r, strict=True) is not None
    return "asleep" if asleep else "awake"


@dataclass
class _Arm:
    """One run of `prove`: who serves, who is proved, and what was done (to undo it)."""

    project: Project
    edge: Edge
    alias: str
    current: str
    target: str
    emulate: bool
    sink: switch.StageSink
    path: PathKind
    target_was: State = "down"
    steps: list[tuple[str, float]] = field(default_factory=list)

    def step(self, name: str, action: Callable[[], object]) -> None:
        self.sink.say(name)
        began = time.monotonic()
        action()
        self.steps.append((name, round(time.monotonic() - began, 3)))

    def away(self, cycles: int, gates: list[str] | None) -> QualifyResult:
        """The serving stack out of the way, the target in, qualified."""
        old, new = self.edge.stacks[self.current], self.edge.stacks[self.target]
        if self.path == "standby" and self.target_was == "asleep":
            standby.switch(self.project, self.edge, self.current, self.target, gates,
                           standby.Steps(self.sink.say, self.steps))  # fmt: skip
        else:
            if self.path == "standby":  # mode wait: vLLM lets running requests end first
                self.step(f"putting {self.current} to sleep",
                          lambda: driver.sleep_stack(self.project, old, mode="wait"))  # fmt: skip
            else:
                self.step(f"stopping {self.current}", lambda: driver.down(self.project, old))
            if self.target_was == "asleep":  # resident, its partner without `standby:`
                self.step(f"waking {self.target}", lambda: driver.wake_stack(self.project, new))
            else:
                self.step(f"starting {self.target}", lambda: self._up(new))
        stage = f"qualifying {self.target}"
        found: list[QualifyResult] = []
        self.step(stage, lambda: found.append(_qualified(
            self.project, new, cycles, lambda s: self.sink.say(f"{stage}: {s}"))))  # fmt: skip
        return found[0]

    def _up(self, r: Resolved) -> None:
        driver.up_or_attach(self.project, r, driver.UpOptions(emulate=self.emulate), self.sink)

    def back(self) -> None:
        """The old stack serving again and the target as it was found, whatever state either is in
        (as `edge recover`)."""
        old, new = self.edge.stacks[self.current], self.edge.stacks[self.target]
        if self.target_was == "asleep":
            with contextlib.suppress(ComposegenError):  # it may be what failed
                self.step(f"putting {self.target} to sleep",
                          lambda: driver.sleep_stack(self.project, new, mode="abort"))  # fmt: skip
        else:
            self.step(f"stopping {self.target}", lambda: driver.down(self.project, new))
        if self.path == "standby":
            self.step(f"waking {self.current}", lambda: driver.wake_stack(self.project, old))
            self.step("warm-up", lambda: sleepcycles.probe(old))
        else:
            self.step(f"starting {self.current}", lambda: self._up(old))
        self.step(f"gates on {self.current}", lambda: capture.require_gates(old, None))

    def failed(self, exc: BaseException) -> ComposegenError:
        """After a failure: the old stack back and the alias on it, or the error that says not."""
        reason = exc.message if isinstance(exc, ComposegenError) else str(exc)
        self.sink.prefix = f"qualifying {self.target} failed, restoring {self.current}: "
        try:
            self.back()
        except (ComposegenError, TimeoutError) as again:
            why = again.message if isinstance(again, ComposegenError) else str(again)
            stage = f"restoring {self.current} failed; the operator has been told why"
            routes.publish(self.project, self.edge,
                           {self.alias: {"to": self.current, "stage": stage}})  # fmt: skip
            journal.end(self.project)
            return EngineError(
                f"qualifying {self.target} failed ({reason}); bringing {self.current} back failed "
                f"too ({why}); {self.alias} answers 503 until a stack serves it",
                hint=f"`composegen status`, `composegen edge recover`, `composegen logs {self.current}`",
            )
        routes.publish(self.project, self.edge)
        journal.end(self.project)
        # Ctrl-C (here, or inside `up`'s wait) still ends the run with its own exit code
        kind = Interrupted if isinstance(exc, Interrupted) else CheckFailed
        return kind(
            f"qualifying {self.target} failed ({reason}); restored: {self.alias} points at {self.current} again",
            details=getattr(exc, "details", None),
        )


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
        raise BadInput(
            f"{name}: not one of the edge's stacks ({', '.join(edge.stacks)}); see edge.yaml"
        )
    started = time.monotonic()
    with privatestate.profile_lock(project, "edge-switch"):
        _refuse_interrupted(project)
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
        try:
            result = arm.away(sleep_cycles, gates)
        except (ComposegenError, TimeoutError) as exc:
            raise arm.failed(exc) from None
        except KeyboardInterrupt:
            raise _interrupted(arm) from None
        evidence = None
        if then == "promote" and result.qualified:
            evidence = proof.qualified_run(project, edge.stacks[name], result.run)
            routes.record(project, edge, alias, name, "promote", evidence)
        else:
            try:
                arm.back()
            except (ComposegenError, TimeoutError) as exc:
                raise arm.failed(exc) from None
        routes.publish(project, edge)
        journal.end(project)
    now = routes.current(project, edge, alias) or current
    return _report(
        alias, name, (current, now), then, result, evidence, (path, why), arm.steps, started,
        arm.sink.seen,
    )  # fmt: skip


def _interrupted(arm: _Arm) -> ComposegenError:
    """Ctrl-C: the old stack restored before composegen ends, exit 130 (a second Ctrl-C leaves it
    to `composegen edge recover`: the journal says what to undo)."""
    return arm.failed(Interrupted("Ctrl-C"))


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
    alias untouched (with --then promote and a pass, it moves: NAME serves already, its gates
    passed)."""
    result = _qualified(project, edge.stacks[name], cycles, None)
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
) -> _Arm:
    """The memory plan (refused, exit 2, before the alias is marked), the journal, the first
    mark."""
    if path == "standby":  # NAME woken or started: either way awake beside CURRENT asleep
        standbyplan.check_switch(project, edge, current, name, emulate)
    entry = journal.begin(project, alias, current, name, "qualify", emulate, path)
    sink = switch.StageSink(project, edge, alias, name, entry)
    return _Arm(project, edge, alias, current, name, emulate, sink, path, was)


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
    return ProofReport(alias=alias, profile=name, serving_before=serving[0],
                       serving_after=serving[1], then=then, qualified=result.qualified,
                       qualify=result, evidence=evidence, path=path[0], path_reason=path[1],
                       stages=stages or [],
                       steps=[StepTime(step=s, seconds=t) for s, t in steps],
                       seconds=round(time.monotonic() - started, 1))  # fmt: skip


def _refuse_interrupted(project: Project) -> None:
    entry = journal.interrupted(project)
    if entry is not None:
        raise CheckFailed(
            f"a switch of {entry['alias']} to {entry['target']} was interrupted at: {entry['step']}",
            hint="`composegen edge recover` undoes it, then run this again",
        )
