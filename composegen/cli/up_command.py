"""`composegen up`: preflight, start and wait for a stack (docs/stack.md walks it through); `wait`
attaches to one starting, `wake` wakes one asleep.

cli/main.py loads this module only when a run names one of them (or lists every command), under its
Ctrl-C guard; the docker libraries load when the command first talks to an engine (driver.preload).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import typer

from composegen.cli.app import JsonOpt, ProfileArg, StackArg, app
from composegen.cli.app import load_profile as _load
from composegen.cli.console import ConsoleSink, with_stages
from composegen.cli.optiongroups import check_seconds, flag, grouped, option
from composegen.cli.readysummary import summary_text
from composegen.cli.stagelines import estimate
from composegen.edge import asleep, standbyplan
from composegen.errors import BadInput as BadInputError
from composegen.interrupts import deferred
from composegen.output import Output, out, terminal_width
from composegen.stack import driver
from composegen.stack.reports import SleepingStatus, UpReport

if TYPE_CHECKING:  # annotations only
    from composegen.profiles.resolved import Resolved
    from composegen.project import Project


@dataclasses.dataclass(frozen=True)
class Start:
    """How `up` starts the stack: driver.UpOptions, from its options."""

    emulate: bool = flag(
        "--emulate", "Run the stack with the emulated vLLM (no GPU; a test double)."
    )
    timeout: float | None = option(
        None, "--timeout", "Seconds to wait for ready (default: the profile's startup_timeout)."
    )
    no_wait: bool = flag("--no-wait", "Start and return without waiting for ready.")
    down_on_failure: bool = flag(
        "--down-on-failure", "Remove the stack when it fails to become ready."
    )
    render_stale: bool = flag("--render", "Render out/NAME first when it is stale.")
    reclaim_shm: bool = flag("--reclaim-shm", "Reclaim leftover /dev/shm files first (ipc: host).")
    allow_download: bool = flag(
        "--allow-download",
        "Start even if the pinned weights are incomplete (the engine downloads them).",
    )

    def options(self) -> driver.UpOptions:
        given = dataclasses.asdict(self)
        return driver.UpOptions(wait=not given.pop("no_wait"), **given)


@app.command()
@grouped
def up(
    *,
    name: str = ProfileArg,
    start: Start,
    verbose: bool = flag("--verbose", "Preflight lines whole at a terminal too (not cut)."),
    standby: bool = flag(
        "--standby", "Once ready and through its gates, put it to sleep (the profile's `standby:`)."
    ),
    sleep_alias: bool = flag(
        "--sleep-alias", "With --standby: even the stack an alias serves (503 meanwhile)."
    ),
    json_: bool = JsonOpt,
) -> None:
    """Preflight, start and wait for a stack; print what the engine reported about its memory.

    Example: composegen up starter --emulate
    """
    timeout = check_seconds("--timeout", start.timeout)
    if standby and start.no_wait:
        msg = "--standby waits for ready (the gates run, then the sleep): drop --no-wait"
        raise BadInputError(msg)
    show = Output(json_)
    # a Ctrl-C inside an import breaks libraries: held until they are loaded
    with deferred():
        driver.preload()
    project, r = _load(name)
    if standby:
        asleep.refuse_aliased(project, r, sleep_alias)
    elif r.profile.standby and (woken := asleep.wake(project, r, None)).stages:  # `wake`'s own
        show.say(f"{name}: {woken.action} (warm-up, identity, gates)")
    standbyplan.check_start(project, r, start.emulate, standby)  # standby stacks: do they fit
    timeout_s = timeout or r.profile.service.startup_timeout
    with ConsoleSink(timeout_s, quiet=show.json, verbose=verbose) as sink:
        estimate(sink.tracker, project, name, start.emulate)
        result = driver.start(project, r, start.options(), sink, timeout)
        if isinstance(result, str):  # already starting, and --no-wait: nothing to follow here
            return out(result)
    result = with_stages(result, sink)  # the engine's stages join the readiness phases
    if standby:
        result = _to_sleep(project, r, result, show)
    done = (
        f"{name}: started (not waiting); `composegen status {name}`"
        if start.no_wait
        else lambda: summary_text(result, terminal_width()) + _nodes_text(result)
    )
    show.report(result, done)


def _to_sleep(project: Project, r: Resolved, result: UpReport, show: Output) -> UpReport:
    if r.profile.standby is None:
        msg = f"--standby: {r.name} has no `standby:` in its profile (composegen docs standby)"
        raise BadInputError(msg)
    was = driver.sleep_state(project, r)  # already asleep: put_to_sleep runs no gates
    slept = asleep.put_to_sleep(project, r, None)
    status = SleepingStatus(level=slept.level, since=slept.since, gpu_gib_held=slept.residue_gib)
    held = (
        f"; the engine still holds {slept.residue_gib:g} GiB of GPU memory"
        if slept.residue_gib
        else ""
    )
    done = "already asleep, no gates run" if was else "gates passed, asleep"
    show.say(f"{r.name}: {done} (level {slept.level}){held}")
    return result.model_copy(update={"asleep": status})


@app.command()
def wake(
    name: str = ProfileArg,
    gates: str = typer.Option("smoke", "--gates", help="Gates it must pass once awake."),
    json_: bool = JsonOpt,
) -> None:
    """Wake a stack put to sleep (`up --standby`): the wake, a warm-up request, its identity and
    gates, as a switch does; an alias on it answers 503 + the step until then.

    Example: composegen wake sb-4096  # in examples/team-edge
    """
    project, r = _load(name)
    result = asleep.wake(project, r, [g for g in gates.split(",") if g])
    Output(json_).report(result, lambda: f"{result.action} ({result.seconds:.1f} s)")


WaitTimeout = option(
    None, "--timeout", "Seconds to wait (default: what is left of startup_timeout since the start)."
)


@app.command()
def wait(
    name: str = StackArg,
    timeout: float | None = WaitTimeout,
    json_: bool = JsonOpt,
) -> None:
    """Attach to a starting stack: its load, stage by stage, until ready (0), failed (3) or Ctrl-C
    (130).

    Example: composegen up starter --no-wait --emulate && composegen wait starter
    """
    check_seconds("--timeout", timeout)
    # a Ctrl-C inside an import breaks libraries: held until they are loaded
    with deferred():
        driver.preload()
    project, r = _load(name)
    with ConsoleSink(timeout_s=timeout or r.profile.service.startup_timeout, quiet=json_) as sink:
        estimate(sink.tracker, project, name)
        report = driver.attach(project, r, sink, timeout)
    report = with_stages(report, sink)
    Output(json_).report(report, lambda: summary_text(report, terminal_width()))


def _nodes_text(result: UpReport) -> str:
    """One line per node under the `up` summary of a multi-node stack."""
    return "".join(
        f"  node {n.name:<12} rank {n.rank} {n.role:<7} {n.engine}  ({n.project})\n"
        for n in result.nodes or []
    )
