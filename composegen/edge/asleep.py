"""Everything that may put an engine to sleep outside a switch — `qualify --sleep-cycles`, `up
--standby`, a campaign arm — goes through `sleeping`: the switch's own lock (so a promote and a
sleep qualification never run at once) and, when an alias points at the stack, the switch's journal
(by "sleep") and the alias marked BEFORE the engine sleeps: clients get 503 + Retry-After + the stage
in composegen's words (STAGE), never the engine's own text. When it ends the engine is awake and the
mark goes, or it was left asleep on purpose (`up --standby --sleep-alias`) and the mark stays. A
failure, Ctrl-C or SIGTERM wakes it first; a kill -9, or a wake that fails too, leaves the journal
for `edge recover` (which wakes it, warm-up, identity, gates)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from composegen import privatestate
from composegen.edge import config, journal, routes, standby, undo
from composegen.edge.config import Edge
from composegen.edge.reports import RecoverReport
from composegen.errors import BadInput, ComposegenError
from composegen.profiles.resolved import Resolved
from composegen.project import Project
from composegen.stack import driver


def stage(alias: str, name: str, since: str) -> str:
    return f"{alias}'s engine {name} is asleep since {since}; `composegen wake {name}`"


def aliased(project: Project, edge: Edge, name: str) -> list[str]:
    """The aliases that point at NAME."""
    return [a for a, p in routes.aliases(project, edge).items() if p == name]


def publish(project: Project, edge: Edge) -> None:
    """routes.json from the assignments, an alias whose stack sleeps marked so."""
    marks: dict[str, routes.Switching] = {}
    for alias, name in routes.aliases(project, edge).items():
        r = edge.stacks.get(name or "")
        state = driver.sleep_state(project, r) if r is not None and r.profile.standby else None
        if state is not None and name is not None:
            marks[alias] = {"to": name, "stage": stage(alias, name, state.since or "unknown")}
    routes.publish(project, edge, marks)


@contextlib.contextmanager
def sleeping(project: Project, r: Resolved, by: str) -> Iterator[None]:
    """The module's docstring; BY: what sleeps it (the journal's `by`)."""
    if not config.configured(project):
        yield
        return
    edge = config.load(project)
    with driver.signals_as_interrupts(), privatestate.profile_lock(project, "edge-switch"):
        undo.refuse_interrupted(project)
        with marked(project, edge, r, by):
            yield


@contextlib.contextmanager
def marked(project: Project, edge: Edge, r: Resolved, by: str) -> Iterator[None]:
    """The journal and the mark while R may sleep (the lock held by the caller)."""
    on = aliased(project, edge, r.name)
    if not on:
        yield
        return
    ctr = driver.head_container(project, r)
    emulated = bool(ctr and ctr.emulated)
    entry = journal.begin(project, on[0], r.name, r.name, by, emulated, "standby",
                          source_emulated=emulated, target_was="awake")  # fmt: skip
    since = privatestate.stamp()
    routes.publish(project, edge, {a: {"to": r.name, "stage": stage(a, r.name, since)} for a in on})
    try:
        yield
    except BaseException:
        with contextlib.suppress(ComposegenError):  # woken: the mark goes; not: left to recover
            if driver.sleep_state(project, r) is not None:
                journal.step(project, entry, f"waking {r.name}")
                driver.wake_stack(project, r)
            publish(project, edge)
            journal.end(project)
        raise
    publish(project, edge)
    journal.end(project)


def refuse_aliased(project: Project, r: Resolved, sleep_alias: bool) -> None:
    """`up NAME --standby` on the stack an alias serves: refused (exit 2) unless asked explicitly,
    with the order that switches by sleep instead."""
    on = aliased(project, config.load(project), r.name) if config.configured(project) else []
    if on and not sleep_alias:
        alias = on[0]
        raise BadInput(
            f"--standby: {alias} points at {r.name}: asleep, it would answer {alias}'s clients 503",
            hint=f"start the candidate asleep first (`composegen up OTHER --standby`), then "
            f"`composegen promote OTHER --alias {alias}` puts {r.name} to sleep behind the switch; "
            f"or `--sleep-alias` to sleep it now (503 until `composegen wake {r.name}`)",
        )


def put_to_sleep(project: Project, r: Resolved, gates: list[str] | None) -> driver.Asleep:
    """`up --standby`: its gates, then asleep, under the lock, the alias (if any) marked first and
    left so (`composegen wake` ends it)."""
    with sleeping(project, r, "sleep"):
        return standby.put_to_sleep(project, r, gates)


def wake(project: Project, r: Resolved, gates: list[str] | None) -> RecoverReport:
    """`composegen wake NAME` (and `up NAME` of a sleeping stack): woken, warm-up, identity, gates
    — a switch's steps — under the lock, the alias on it told each step; then its mark goes. A
    failure leaves the alias 503 saying so (exit 3); Ctrl-C or a kill, the journal to recover."""
    started, ctr = time.monotonic(), driver.head_container(project, r)
    if driver.sleep_state(project, r, strict=True) is None:
        return RecoverReport(alias=None, action=f"{r.name} is awake: nothing to wake",
                             profile=r.name, stages=[], seconds=0.0)  # fmt: skip
    edge = config.load(project) if config.configured(project) else None
    on = aliased(project, edge, r.name) if edge else []
    with driver.signals_as_interrupts(), privatestate.profile_lock(project, "edge-switch"):
        sink = None
        if edge and on:
            undo.refuse_interrupted(project)
            emulated = bool(ctr and ctr.emulated)
            entry = journal.begin(project, on[0], r.name, r.name, "wake", emulated, "standby",
                                  source_emulated=emulated, target_was="awake")  # fmt: skip
            sink = undo.StageSink(project, edge, on[0], r.name, entry)
        try:
            for name, action in undo.waking(project, r, gates):
                sink.run(name, action) if sink else action()
        except ComposegenError as exc:
            if edge and on:
                raise undo.restore_failed(project, edge, on[0], r.name, "the wake", exc) from None
            raise
        if edge and on:
            publish(project, edge)
            journal.end(project)
    return RecoverReport(alias=on[0] if on else None, action=f"{r.name} woken", profile=r.name,
                         stages=sink.seen if sink else [],
                         seconds=round(time.monotonic() - started, 1))  # fmt: skip


def sleep(project: Project, r: Resolved) -> driver.Asleep:
    """R to sleep and left so (a campaign's bracket), an alias on it marked first and kept so."""
    with sleeping(project, r, "sleep"):
        return driver.sleep_stack(project, r)


def wake_stack(project: Project, r: Resolved) -> float:
    """R woken (seconds), then an alias on it unmarked (a campaign's next arm)."""
    with sleeping(project, r, "wake"):
        return driver.wake_stack(project, r)
