"""Undo, shared by a switch (switch.py), `qualify --alias` (proofsteps.py) and `edge recover`
(recovery.py): the stage clients are told (StageSink, which also keeps each step's seconds), what to
put back (Undo) and how, and the error that says how it ended. Put back means: the target as it was
found (down: stopped; asleep: back to sleep; awake: left), the serving stack serving again as it ran
(a standby run's engine woken, warmed up, checked to be itself; a cold run's brought back, emulated or
real as the journal says), then its gates."""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from composegen.edge import journal, routes, standby
from composegen.edge.config import Edge
from composegen.edge.reports import StepTime
from composegen.edge.timeline import Timeline
from composegen.errors import CheckFailed, ComposegenError, EngineError, Interrupted
from composegen.evidence import gatecheck
from composegen.project import Project
from composegen.stack import driver
from composegen.stack.progress import LogLine, ProgressSink
from composegen.vllm import stages


class StageSink(ProgressSink):
    """Each step and `up`'s progress as the 503's stage (the journal first); keeps step timings."""

    def __init__(
        self,
        project: Project,
        edge: Edge,
        alias: str,
        target: str | None,
        entry: journal.Journal | None = None,
        clock: Timeline | None = None,
        show: ProgressSink | None = None,  # the operator's display: every event and step told
    ) -> None:
        self.project, self.edge, self.alias, self.target = project, edge, alias, target
        self.show = show or ProgressSink()
        self.serving: str | None = None  # the stack the alias rests on (what an undo restores)
        self.entry, self.clock, self.prefix = entry, clock, ""
        self.tracker = stages.StageTracker(time.time())
        self.seen: list[str] = []
        self.at: list[float] = []  # time.monotonic() of each stage in `seen`
        self.done: list[tuple[str, float]] = []  # each step run(), with its seconds

    def run(self, name: str, action: Callable[[], object]) -> None:
        """A named step: told, run, timed."""
        self.say(name)
        started = time.monotonic()
        action()
        self.done.append((name, round(time.monotonic() - started, 3)))

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
        at = self.clock.at if self.clock else lambda _: None
        return [StepTime(step=n, seconds=round(s, 3), at=at(start)) for n, start, s in steps]

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
        self.show.told(text)

    def heartbeat(self, t: float, last_line: str) -> None:
        self.show.heartbeat(t, last_line)

    def phase(self, name: str, t: float) -> None:
        self.show.phase(name, t)
        if name in ("preflight", "starting", "created"):
            self.say(name)

    def log_line(self, line: LogLine) -> None:
        self.show.log_line(line)
        self.tracker.feed(line.text, line.timestamp or time.time())
        if self.tracker.current is not None and self.tracker.current.key != "ready":
            self.say(self.tracker.summary())


@dataclass(frozen=True)
class Undo:
    """What to put back: TARGET as it was found, SERVING (None: nothing served) serving again."""

    serving: str | None
    target: str
    path: str  # standby: SERVING was put to sleep (woken); cold: it was downed (brought back)
    target_was: str  # down | asleep | awake
    emulated: bool  # SERVING ran emulated (restarted so: never a real stack swapped for a double)


def put_back(project: Project, edge: Edge, undo: Undo, sink: StageSink) -> None:
    """UNDO done, each step told and timed; raises what failed."""
    new, run = edge.stacks.get(undo.target), sink.run
    if new is not None and undo.target_was == "asleep":
        with contextlib.suppress(ComposegenError):  # its engine may be what failed
            sleep = lambda: driver.sleep_stack(project, new, mode="abort")  # noqa: E731
            run(f"putting {undo.target} to sleep", sleep)
    elif new is not None and undo.target_was == "down":
        run(f"stopping {undo.target}", lambda: driver.down(project, new))
    if undo.serving is None:
        return
    old = edge.stacks[undo.serving]
    if undo.path == "standby":
        for name, action in standby.waking(project, old, None):
            run(name, action)
        return
    how = driver.UpOptions(emulate=undo.emulated, render_stale=False)
    run(f"starting {undo.serving}", lambda: driver.up_or_attach(project, old, how, sink))
    run(f"gates on {undo.serving}", lambda: gatecheck.require_gates(old, None))


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
    sink: StageSink, doing: str, exc: BaseException, undo: Callable[[], None], done: str
) -> ComposegenError:
    """DOING failed with EXC (an error, a bug, Ctrl-C or a signal): UNDO brings SERVING back, the
    alias unmarked, the journal ended; the error that says how it ended (exit 1, or EXC's own
    interrupt code). A Ctrl-C during UNDO leaves the journal (and the mark) to `edge recover`."""
    project, edge, alias, serving = sink.project, sink.edge, sink.alias, sink.serving
    why = reason(exc)
    sink.prefix = f"{doing} failed, restoring {serving}: "
    try:
        undo()
    except (KeyboardInterrupt, Interrupted) as again:  # `up` turns Ctrl-C into Interrupted
        raise left_to_recover(again, f"{doing} failed ({why})", serving) from None
    except Exception as again:  # whatever it was, the alias must say so
        return restore_failed(project, edge, alias, serving, f"{doing} failed ({why})", again)
    routes.publish(project, edge)
    journal.end(project)
    said = f"{doing} failed ({why}); {done}: {alias} points at {serving} again"
    if isinstance(exc, (Interrupted, KeyboardInterrupt)):
        return interrupted(exc, said)
    return CheckFailed(said, details=getattr(exc, "details", None))


def restore_failed(
    project: Project, edge: Edge, alias: str, current: str | None, what: str, exc: BaseException
) -> EngineError:
    """Bringing CURRENT back failed (exit 3): the alias answers 503 saying so, the journal ends."""
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
    hint = "`composegen edge recover` finishes it"
    return interrupted(exc, f"{what}; interrupted while bringing {current} back", hint=hint)


def refuse_interrupted(project: Project) -> None:
    """A switch or `qualify --alias` whose composegen is gone: refused until `edge recover`; a
    campaign that keeps the alias's engine asleep (edge/asleep.py `held`): until it wakes it."""
    entry = journal.read(project)
    if entry is not None and journal.holding(entry):
        who = f"campaign (composegen pid {entry['pid']}) keeps {entry['target']} asleep"
        raise CheckFailed(f"{who} until its next arm wakes it", hint="wait for it, or stop it")
    if entry is not None and not journal.owner_alive(entry):
        raise CheckFailed(
            f"a switch of {entry['alias']} to {entry['target']} was interrupted at: {entry['step']} "
            f"(composegen pid {entry['pid']} is gone)",
            hint="`composegen edge recover` undoes it, then run this again",
        )
