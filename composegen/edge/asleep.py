"""Everything that may put an engine to sleep outside a switch — `qualify --sleep-cycles`, `up
--standby`, `wake`, campaign arms (`held`) — takes the switch's lock and, when an alias points at the
stack, its journal and the alias marked (STAGE) BEFORE the engine sleeps (docs/standby.md: what each
command does to an alias). SIGTERM and SIGHUP act as Ctrl-C (edge.yaml or not); a failure or any
of them wakes an aliased engine first; a kill -9, or a wake that fails too, leaves the journal for
`edge recover`."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

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


class _Told:
    """The steps of a stack no alias points at: run, named, nothing published."""

    def __init__(self) -> None:
        self.alias, self.seen = None, list[str]()

    def run(self, name: str, action: Callable[[], object]) -> None:
        self.seen.append(name)
        action()


@contextlib.contextmanager
def sleeping(project: Project, r: Resolved, by: str) -> Iterator[undo.StageSink | _Told]:
    """The module's docstring; BY: what sleeps it (the journal's `by`); yields what runs steps."""
    with _locked(project) as edge, marked(project, edge, r, by) as sink:
        yield sink


@contextlib.contextmanager
def _locked(project: Project) -> Iterator[Edge | None]:
    """The switch's lock, an interrupted switch refused; the edge (None: none here, no lock).
    SIGTERM and SIGHUP act as Ctrl-C either way."""
    with driver.signals_as_interrupts():
        if not config.configured(project):
            yield None
            return
        with privatestate.profile_lock(project, "edge-switch"):
            undo.refuse_interrupted(project)
            yield config.load(project)


@contextlib.contextmanager
def marked(
    project: Project, edge: Edge | None, r: Resolved, by: str, held: driver.Held = None
) -> Iterator[undo.StageSink | _Told]:
    """The journal and the mark while R may sleep (the lock held by the caller); HELD: R's handle."""
    if edge is None or not (on := aliased(project, edge, r.name)):
        yield _Told()
        return
    ctr = held[r.name].ctr if held else driver.head_container(project, r)
    emulated = bool(ctr and ctr.emulated)
    kept = (on[0], r.name, r.name, by, emulated, "standby", emulated, "awake")
    sink = undo.StageSink(project, edge, on[0], r.name, journal.begin(project, *kept))
    sink.say(stage(on[0], r.name, privatestate.stamp()))
    try:
        yield sink
    except BaseException:
        with contextlib.suppress(ComposegenError):  # woken: the mark goes; not: left to recover
            if driver.sleep_state(project, r) is not None:
                sink.run(f"waking {r.name}", lambda: driver.wake_stack(project, r))
            publish(project, edge)
            journal.end(project)
        raise
    publish(project, edge)
    journal.end(project)


@contextlib.contextmanager
def held(project: Project, r: Resolved, waking: bool, emulated: bool) -> Iterator[None]:
    """A campaign's sleep or wake of R (campaign/arm.py, resident.py): as `sleeping`, but the
    journal (by "campaign") outlives the step while R sleeps — it bridges the arms: a promote,
    qualify or wake meanwhile is refused, and after a Ctrl-C or a kill `edge recover` wakes R, or
    `campaign resume` adopts the journal and goes on. Ended once R is awake (or down)."""
    edge = config.load(project) if config.configured(project) else None
    if edge is None or not (on := aliased(project, edge, r.name)):
        yield
        return
    with driver.signals_as_interrupts(), privatestate.profile_lock(project, "edge-switch"):
        entry = journal.read(project)
        if entry is None or (entry["by"], entry["target"]) != ("campaign", r.name):
            undo.refuse_interrupted(project)
        kept = (on[0], r.name, r.name, "campaign", emulated, "standby", emulated, "awake")
        sink = undo.StageSink(project, edge, on[0], r.name, journal.begin(project, *kept))
        sink.say(f"waking {r.name}" if waking else stage(on[0], r.name, privatestate.stamp()))
        try:
            yield
        finally:
            with contextlib.suppress(ComposegenError):  # unknown: the journal stays to recover
                if driver.sleep_state(project, r) is None:
                    journal.end(project)
                publish(project, edge)


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
    """`up --standby`: gates, then asleep under the lock, the alias marked first, left so (`wake`)."""
    with sleeping(project, r, "sleep"):
        return standby.put_to_sleep(project, r, gates)


def wake(project: Project, r: Resolved, gates: list[str] | None) -> RecoverReport:
    """`composegen wake NAME` (and `up NAME` of a sleeping stack): R listed and asked once, strictly
    (awake: nothing to wake, no lock); asleep, a switch's steps under the lock from that one handle,
    the alias told each; its mark goes (a failure, or a kill: `edge recover`)."""
    started, held = time.monotonic(), driver.handles(project, [r.name], {r.name: r}, r.name)
    asleep = r.name in held and held[r.name].asleep is not None
    locked = _locked(project) if asleep else contextlib.nullcontext()
    with locked as edge, marked(project, edge, r, "wake", held) as sink:
        for name, step in standby.waking(project, r, gates, held) if asleep else []:
            sink.run(name, step)
    action = f"{r.name} woken" if asleep else f"{r.name} is awake: nothing to wake"
    seconds = round(time.monotonic() - started, 1)
    return RecoverReport(
        alias=sink.alias, action=action, profile=r.name, stages=sink.seen, seconds=seconds
    )
