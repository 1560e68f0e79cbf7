"""`promote PROFILE --alias NAME` and `rollback NAME`: point an alias at another stack, with
evidence. One Switch: mark the alias (503 + Retry-After + the stage), the standby path
(edge/standby.py) or the cold one (down the current stack, up the new one: each load stage goes into
the 503 answers), gates, then point the alias and record the assignment with its evidence hash.
Each step is journaled before clients are told it (edge/journal.py). A failure, Ctrl-C or a signal at
any step puts the old stack back serving (edge/undo.py); a kill -9 is undone by `edge recover`."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

from composegen import privatestate
from composegen.edge import evidence as proof
from composegen.edge import journal, routes, service, standby, standbyplan, undo
from composegen.edge.config import Edge
from composegen.edge.reports import SwitchReport
from composegen.edge.routes import Proof
from composegen.edge.timeline import Timeline
from composegen.edge.undo import StageSink
from composegen.errors import BadInput, CheckFailed, ComposegenError
from composegen.evidence import gatecheck, sleepcycles
from composegen.profiles import resolve
from composegen.profiles.resolved import Resolved
from composegen.project import Project
from composegen.stack import driver
from composegen.stack.progress import ProgressSink


def promote(
    project: Project,
    edge: Edge,
    profile: str,
    alias: str,
    campaign: str | None = None,
    run: str | None = None,
    force: str | None = None,
    emulate: bool = False,
    gates: list[str] | None = None,
    show: ProgressSink | None = None,
) -> SwitchReport:
    clock = Timeline()
    if profile not in edge.stacks:
        msg = f"{profile}: not one of the edge's stacks ({', '.join(edge.stacks)}); see edge.yaml"
        raise BadInput(msg)
    if routes.current(project, edge, alias) == profile:  # nothing moves: no proof asked (exit 0)
        how = (profile, "promote", None, emulate, gates, clock, profile)
        return Switch(project, edge, alias, *how).report(None, 0.0, "unchanged")
    r = resolve.load(project, profile)
    evidence = (
        proof.campaign_decision(project, campaign, r, force)
        if campaign
        else proof.qualified_run(project, r, run, emulate)
    )
    clock.mark("proof")
    return Switch(
        project, edge, alias, profile, "promote", evidence, emulate, gates, clock, show=show
    ).run()


def rollback(
    project: Project,
    edge: Edge,
    alias: str,
    emulate: bool = False,
    gates: list[str] | None = None,
    show: ProgressSink | None = None,
) -> SwitchReport:
    clock = Timeline()
    back = routes.previous(project, edge, alias)
    clock.mark("proof")  # the previous assignment, with the evidence it was made on
    how = (back["profile"], "rollback", back.get("evidence"), emulate, gates, clock)
    return Switch(project, edge, alias, *how, show=show).run()


PathKind = Literal["standby", "cold", "unchanged"]


@dataclass
class Switch:
    """One switch of ALIAS to TARGET: who asked (BY) on what proof, how, and what it found."""

    project: Project
    edge: Edge
    alias: str
    target: str
    by: str
    evidence: Proof | None
    emulate: bool
    gates: list[str] | None
    clock: Timeline
    current: str | None = None
    cold: str | None = None  # why the cold path runs (None: the standby path)
    show: ProgressSink | None = None  # the operator's display (undo.StageSink)
    held: driver.Held = None  # the running stacks, as the standby path found them (why_not)

    def run(self) -> SwitchReport:
        started = time.monotonic()
        lock = privatestate.profile_lock(self.project, "edge-switch")
        with driver.signals_as_interrupts(), lock:
            undo.refuse_interrupted(self.project)
            self.current = routes.current(self.project, self.edge, self.alias)
            if self.current == self.target:  # the proof is checked (above): exit 0
                return self.report(None, started, "unchanged")
            sink = self.prepare()
            try:
                self.steps(sink)
            except BaseException as exc:  # a failure, a bug, Ctrl-C or SIGTERM: undone
                raise self.undone(sink, exc) from None
            moved = routes.record(
                self.project, self.edge, self.alias, self.target, self.by, self.evidence
            )
            self.evidence = moved["evidence"]
            routes.publish(self.project, self.edge)
            moved_at = time.monotonic()
            journal.end(self.project)
        return self.report(sink, started, "cold" if self.cold else "standby", moved_at)

    def prepare(self) -> StageSink:
        """The checks that refuse before the alias is marked, the journal, the first mark's sink."""
        project, edge, current, target = self.project, self.edge, self.current, self.target
        self.cold = self.why_not()
        if self.cold is not None:
            driver.engine_info()  # the engine answers, or nothing changes: the alias stays
            if not self.emulate:
                _can_start(project, edge.stacks[target])
        service.running(edge, project)  # the edge carries the alias, or nothing changes (exit 3)
        self.clock.mark("state")
        if self.cold is None and current is not None:  # the memory plan: refused (exit 2)
            standbyplan.check_switch(project, edge, current, target, self.emulate, self.held)
            standby.preload_gates()  # the gates' client loads while the engines sleep and wake
            self.clock.mark("plan")
        path = "cold" if self.cold else "standby"
        entry = journal.begin(project, self.alias, current, target, self.by, self.emulate, path)
        self.clock.mark("journal")
        sink = StageSink(project, edge, self.alias, target, entry, self.clock, self.show)
        sink.serving = current
        return sink

    def steps(self, sink: StageSink) -> None:
        project, edge, current, target = self.project, self.edge, self.current, self.target
        if self.cold is None and current is not None:
            standby.sleep_drained(project, edge.stacks[current], sink.run, self.held)
            for name, step in standby.waking(project, edge.stacks[target], self.gates, self.held):
                sink.run(name, step)
            return
        if current is not None:
            sink.say(f"stopping {current}")
            driver.down(project, edge.stacks[current])
        r = edge.stacks[target]
        driver.up(project, r, driver.UpOptions(emulate=self.emulate, render_stale=False), sink)
        sink.run(f"gates on {target}", lambda: gatecheck.require_gates(r, self.gates))

    def undone(self, sink: StageSink, exc: BaseException) -> ComposegenError:
        """The old stack back as it ran (woken, or brought up) and the alias on it."""
        path = "cold" if self.cold else "standby"
        was = "down" if self.cold else "asleep"
        plan = undo.Undo(self.current, self.target, path, was, self.emulate)
        doing = f"switching {self.alias} to {self.target}" + ("" if self.cold else " by sleep")
        done = "rolled back" if self.cold else f"{self.current} is awake again"
        return undo.restored(
            sink, doing, exc, lambda: undo.put_back(self.project, self.edge, plan, sink), done
        )

    def report(
        self, sink: StageSink | None, started: float, path: PathKind, moved_at: float | None = None
    ) -> SwitchReport:
        why = f"{self.alias} already serves {self.target}" if sink is None else self.cold
        return SwitchReport(
            alias=self.alias,
            previous=self.current,
            profile=self.target,
            by=self.by,
            evidence=self.evidence or None,
            stages=sink.seen if sink else [],
            seconds=round(time.monotonic() - started, 1) if sink else 0.0,
            path=path,
            path_reason=why or self.resident(),
            steps=sink.timed(until=moved_at) if sink else [],
            before=self.clock.before if sink else [],
            moved_at=self.clock.at(moved_at) if moved_at else None,
        )

    def why_not(self) -> str | None:
        """Why the switch cannot go by sleep (None: it can); the handles of the standby path kept:
        the project's running stacks, each listed and asked once (the target strictly)."""
        current, target, stacks = self.current, self.target, self.edge.stacks
        if current is None:
            return "nothing serves the alias yet"
        missing = [n for n in (current, target) if stacks[n].profile.standby is None]
        if missing:
            return f"{' and '.join(missing)} {'has' if len(missing) == 1 else 'have'} no `standby:`"
        self.held = driver.handles(self.project, [target], stacks)
        if target not in self.held or self.held[target].asleep is None:
            return f"{target} is not up and asleep (`composegen up {target} --standby`)"
        return None

    def resident(self) -> str:
        """Why the standby path ran, and whether sleep was qualified for the target's engine here."""
        target, h = self.target, (self.held or {}).get(self.target)
        r, emulated = self.edge.stacks[target], bool(h and h.ctr.emulated)
        if (kept := sleepcycles.recorded(self.project, r, emulated)) and kept.get("passed"):
            qualified = f"sleep qualified here at {kept.get('at')}"
        else:
            qualify = f"`composegen qualify {target} --sleep-cycles 10`"
            qualified = f"WARNING: sleep not qualified here ({qualify})"
        return f"{self.current} and {target} are resident (standby), {target} asleep; {qualified}"


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
            fetch, n = f"`composegen weights {r.name} --download`", len(found.missing)
            missing.append(f"its weights are incomplete ({n} file(s) missing: {fetch})")
    if missing:
        raise CheckFailed(f"{r.name} cannot start: {'; '.join(missing)}; nothing was changed")
