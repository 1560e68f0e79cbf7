"""`promote PROFILE --alias NAME` and `rollback NAME`: point an alias at another stack, with
evidence.

On a box that runs one stack at a time a switch is: mark the alias switching (the gatekeeper answers
503 + Retry-After + the stage), down the current stack, up the new one (each load stage, as `up`'s
own stage detection sees it, goes into the 503 answers), wait, gates, then point the alias and
record the assignment with its evidence hash. Clients never get another model than the alias points
at. A failure at any step brings the previous stack back up and points the alias at it again, and
says so.

Before the alias leaves its stack, the engine must answer (a mistyped DOCKER_HOST changes nothing).
Each step is written to the switch's journal (edge/journal.py) as it is told to clients; `recover`
undoes a switch whose composegen was killed. Clients only ever read composegen's own words as the
stage: the engine's errors go to the operator's terminal.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from composegen import privatestate
from composegen.edge import evidence as proof
from composegen.edge import journal, routes, standby, standbyplan
from composegen.edge.config import Edge
from composegen.edge.reports import StepTime, SwitchReport
from composegen.edge.routes import Proof
from composegen.edge.timeline import Timeline
from composegen.errors import BadInput, CheckFailed, ComposegenError, EngineError, Interrupted
from composegen.evidence import gatecheck
from composegen.profiles import resolve
from composegen.profiles.resolved import Resolved
from composegen.project import Project
from composegen.stack import driver
from composegen.stack.progress import LogLine, ProgressSink
from composegen.vllm import stages


class StageSink(ProgressSink):
    """Turns `up`'s progress into the stage clients see in the 503 answers (routes.json)."""

    def __init__(
        self,
        project: Project,
        edge: Edge,
        alias: str,
        target: str,
        entry: journal.Journal | None = None,
        clock: Timeline | None = None,
    ) -> None:
        self.project, self.edge, self.alias, self.target, self.entry = (
            project,
            edge,
            alias,
            target,
            entry,
        )
        self.clock = clock
        self.prefix = ""
        self.tracker = stages.StageTracker(time.time())
        self.seen: list[str] = []
        self.at: list[float] = []  # time.monotonic() of each stage in `seen`

    def timed(self, until: float | None = None) -> list[StepTime]:
        """Each stage told with its seconds (until the next one, the last until UNTIL or now) and
        when it began; `loading weights 1/4 … 4/4` is one step."""
        ends = [*self.at[1:], until or time.monotonic()]
        steps: list[tuple[str, float, float]] = []
        for text, start, end in zip(self.seen, self.at, ends, strict=True):
            name = re.sub(r" \d+/\d+$", "", text)
            if steps and steps[-1][0] == name:
                steps[-1] = (name, steps[-1][1], steps[-1][2] + end - start)
            else:
                steps.append((name, start, end - start))
        return [StepTime(step=name, seconds=round(seconds, 3),
                         at=self.clock.at(start) if self.clock else None)
                for name, start, seconds in steps]  # fmt: skip

    def say(self, stage: str) -> None:
        text = f"{self.prefix}{stage}"
        if self.seen and self.seen[-1] == text:
            return
        self.seen.append(text)
        self.at.append(time.monotonic())
        # the journal first: a kill between the two leaves the step it was in
        if self.entry is not None:
            journal.step(self.project, self.entry, text)
        routes.publish(self.project, self.edge, {self.alias: {"to": self.target, "stage": text}})

    def phase(self, name: str, t: float) -> None:
        if name in ("preflight", "starting", "created"):
            self.say(name)

    def log_line(self, line: LogLine) -> None:
        self.tracker.feed(line.text, line.timestamp or time.time())
        if self.tracker.current is not None and self.tracker.current.key != "ready":
            self.say(self.tracker.summary())


def promote(
    project: Project,
    edge: Edge,
    profile: str,
    alias: str,
    *,
    campaign: str | None = None,
    run: str | None = None,
    force: str | None = None,
    emulate: bool = False,
    gates: list[str] | None = None,
) -> SwitchReport:
    clock = Timeline()
    if profile not in edge.stacks:
        raise BadInput(
            f"{profile}: not one of the edge's stacks ({', '.join(edge.stacks)}); see edge.yaml"
        )
    r = resolve.load(project, profile)
    evidence = (
        proof.campaign_decision(project, campaign, r, force)
        if campaign
        else proof.qualified_run(project, r, run)
    )
    clock.mark("proof")
    return _switch(project, edge, alias, profile, "promote", evidence, emulate, gates, clock)


def rollback(
    project: Project,
    edge: Edge,
    alias: str,
    *,
    emulate: bool = False,
    gates: list[str] | None = None,
) -> SwitchReport:
    clock = Timeline()
    back = routes.previous(project, edge, alias)
    clock.mark("proof")  # the previous assignment, with the evidence it was made on
    return _switch(
        project,
        edge,
        alias,
        back["profile"],
        "rollback",
        back.get("evidence"),
        emulate,
        gates,
        clock,
    )


def _switch(
    project: Project,
    edge: Edge,
    alias: str,
    target: str,
    by: str,
    evidence: Proof | None,
    emulate: bool,
    gates: list[str] | None,
    clock: Timeline,
) -> SwitchReport:
    started = time.monotonic()
    with privatestate.profile_lock(project, "edge-switch"):
        refuse_interrupted(project)
        current = routes.current(project, edge, alias)
        # the proof is checked (above); nothing to move: the loop closes, exit 0
        if current == target:
            why = f"{alias} already serves {target}"
            return SwitchReport(alias=alias, previous=current, profile=target, by=by, evidence=evidence, stages=[],
                                seconds=0.0, path="unchanged", path_reason=why)  # fmt: skip
        # None: both resident, the target asleep (its engine answered: nothing changes otherwise)
        cold = standby.why_not(project, edge, current, target)
        if cold is not None:
            driver.engine_info()  # the engine answers, or nothing changes: the alias stays
            if not emulate:
                _can_start(project, edge.stacks[target])
        clock.mark("state")
        if cold is None and current is not None:  # the memory plan: refused (exit 2) with figures
            standbyplan.check_switch(project, edge, current, target, emulate)
            standby.preload_gates()  # the gates' client loads while the engines sleep and wake
            clock.mark("plan")
        entry = journal.begin(
            project, alias, current, target, by, emulate, "cold" if cold else "standby"
        )
        clock.mark("journal")
        sink = StageSink(project, edge, alias, target, entry, clock)
        try:
            if cold is None and current is not None:
                _by_sleep(project, edge, alias, current, target, gates, sink)
            else:
                if current is not None:
                    sink.say(f"stopping {current}")
                    driver.down(project, edge.stacks[current])
                _bring_up(project, edge, target, emulate, gates, sink)
        except (ComposegenError, TimeoutError) as exc:
            if cold is None:
                raise _woken_back(project, edge, alias, current, target, exc) from None
            raise _rolled_back(project, edge, alias, current, target, exc, emulate, sink) from None
        except KeyboardInterrupt:
            # the alias keeps its old assignment; clients see what is there
            routes.publish(project, edge)
            journal.end(project)
            raise
        moved = routes.record(project, edge, alias, target, by, evidence)
        routes.publish(project, edge)
        moved_at = time.monotonic()
        journal.end(project)
    return SwitchReport(
        alias=alias,
        previous=current,
        profile=target,
        by=by,
        evidence=moved["evidence"] or None,
        stages=sink.seen,  # what clients were told, in order
        seconds=round(time.monotonic() - started, 1),
        path="cold" if cold else "standby",
        path_reason=cold or standby.reason(project, edge, current, target),
        steps=sink.timed(until=moved_at),
        before=clock.before,
        moved_at=clock.at(moved_at),
    )


def _can_start(project: Project, r: Resolved) -> None:
    """What a cold start of R needs that can be checked while another stack still holds the GPUs:
    the engine's GPU runtime, its image on this engine and its pinned weights complete. Refused
    before the alias moves."""
    missing = []
    # the GPUs themselves: the old stack's now
    if "nvidia" not in (driver.engine_info().get("Runtimes") or {}):
        missing.append("the engine has no nvidia runtime (nvidia-container-toolkit)")
    if not driver.image_present(r.profile.image):
        missing.append(
            f"its image {r.profile.image} is not on this engine (`docker pull` it first)"
        )
    try:
        found = driver.weights(project, r)
    except ComposegenError as exc:
        missing.append(f"its weights cannot be checked ({exc.message})")
    else:
        if not found.complete:
            missing.append(f"its weights are incomplete ({len(found.missing)} file(s) missing: `composegen "
                           f"weights {r.name} --download`)")  # fmt: skip
    if missing:
        raise CheckFailed(f"{r.name} cannot start: {'; '.join(missing)}; nothing was changed")


def _by_sleep(
    project: Project,
    edge: Edge,
    alias: str,
    current: str,
    target: str,
    gates: list[str] | None,
    sink: StageSink,
) -> None:
    standby.switch(project, edge, current, target, gates, standby.Steps(sink.say))


def _woken_back(
    project: Project, edge: Edge, alias: str, current: str | None, target: str, exc: BaseException
) -> ComposegenError:
    """The standby path failed: standby.switch has put the old engine awake again (or raised
    trying)."""
    reason = exc.message if isinstance(exc, ComposegenError) else str(exc)
    routes.publish(project, edge)
    journal.end(project)
    return CheckFailed(
        f"switching {alias} to {target} by sleep failed ({reason}); {current} is awake again: {alias} points at it",
        details=getattr(exc, "details", None),
    )


def _bring_up(
    project: Project, edge: Edge, name: str, emulate: bool, gates: list[str] | None, sink: StageSink
) -> None:
    r = edge.stacks[name]
    driver.up(project, r, driver.UpOptions(emulate=emulate, render_stale=False), sink)
    sink.say(f"gates on {name}")
    gatecheck.require_gates(r, gates)


def _rolled_back(
    project: Project,
    edge: Edge,
    alias: str,
    current: str | None,
    target: str,
    exc: BaseException,
    emulate: bool,
    sink: StageSink,
) -> ComposegenError:
    def undo() -> None:
        sink.say(f"stopping {target}")
        driver.down(project, edge.stacks[target])
        if current is not None:
            sink.target = current
            _bring_up(project, edge, current, emulate, None, sink)

    return restored(project, edge, alias, current, f"switching {alias} to {target}", exc,
                    undo, sink, "rolled back")  # fmt: skip


def reason(exc: BaseException) -> str:
    """EXC in composegen's words: its message, the signal, or what Python says."""
    if isinstance(exc, ComposegenError):
        return exc.message
    if isinstance(exc, KeyboardInterrupt):
        return str(exc) or "Ctrl-C"
    return str(exc) if isinstance(exc, TimeoutError) else f"{type(exc).__name__}: {exc}"


def interrupted(exc: BaseException, message: str, hint: str | None = None) -> Interrupted:
    """MESSAGE as an Interrupted keeping EXC's exit code: 130 Ctrl-C, 143 SIGTERM, 129 SIGHUP."""
    said = Interrupted(message, hint=hint)
    if isinstance(exc, Interrupted):
        said.exit_code = exc.exit_code
    elif isinstance(exc, KeyboardInterrupt):
        said.exit_code = 128 + getattr(exc, "signum", 2)
    return said


def restored(
    project: Project,
    edge: Edge,
    alias: str,
    current: str | None,
    doing: str,
    exc: BaseException,
    undo: Callable[[], None],
    sink: StageSink,
    done: str,
) -> ComposegenError:
    """DOING failed with EXC (an error, a bug, Ctrl-C or a signal): UNDO brings CURRENT back, the
    alias unmarked, the journal ended; the error that says how it ended (exit 1, or EXC's own
    interrupt code). A Ctrl-C during UNDO leaves the journal to `edge recover`."""
    why = reason(exc)
    sink.prefix = f"{doing} failed, restoring {current}: "
    try:
        undo()
    except (KeyboardInterrupt, Interrupted) as again:  # `up` turns Ctrl-C into Interrupted
        raise left_to_recover(again, f"{doing} failed ({why})", current) from None
    except Exception as again:  # whatever it was, the alias must say so
        return restore_failed(project, edge, alias, current, f"{doing} failed ({why})", again)
    routes.publish(project, edge)
    journal.end(project)
    said = f"{doing} failed ({why}); {done}: {alias} points at {current} again"
    if isinstance(exc, (Interrupted, KeyboardInterrupt)):
        return interrupted(exc, said)
    return CheckFailed(said, details=getattr(exc, "details", None))


def restore_failed(
    project: Project, edge: Edge, alias: str, current: str | None, what: str, exc: BaseException
) -> EngineError:
    """Bringing CURRENT back failed (exit 3): the alias answers 503 saying so (composegen's words,
    never the engine's), the journal ends; WHAT: what came before."""
    stage = f"restoring {current} failed; the operator has been told why"
    routes.publish(project, edge, {alias: {"to": current, "stage": stage}})
    journal.end(project)
    return EngineError(
        f"{what}; bringing {current} back failed ({reason(exc)}); {alias} answers 503 until "
        "a stack is up",
        hint=f"`composegen status`, `composegen logs {current}`",
    )


def left_to_recover(exc: BaseException, what: str, current: str | None) -> Interrupted:
    """Interrupted while bringing CURRENT back: the journal stays for `edge recover` to finish."""
    return interrupted(exc, f"{what}; interrupted while bringing {current} back",
                       hint="`composegen edge recover` finishes it")  # fmt: skip


def refuse_interrupted(project: Project) -> None:
    """A switch or `qualify --alias` whose composegen is gone: refused until `edge recover`."""
    entry = journal.interrupted(project)
    if entry is not None:
        raise CheckFailed(
            f"a switch of {entry['alias']} to {entry['target']} was interrupted at: {entry['step']} "
            f"(composegen pid {entry['pid']} is gone)",
            hint="`composegen edge recover` undoes it, then run this again",
        )
