"""`composegen up`: preflight, start and wait for a stack (docs/stack.md walks it through).

cli/main.py loads this module only when a run names `up` (or lists every command), under its Ctrl-C
guard; the docker libraries load when the command first talks to an engine (driver.preload).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import typer

from composegen.cli.app import JsonOpt, ProfileArg, app
from composegen.cli.app import load_profile as _load
from composegen.cli.console import console_progress, with_stages
from composegen.cli.interrupts import deferred_sigint
from composegen.cli.readysummary import summary_text
from composegen.cli.stagelines import earlier_load_s
from composegen.edge import standby as resident
from composegen.errors import BadInput as BadInputError
from composegen.output import Output, out, terminal_width
from composegen.stack import driver
from composegen.stack.reports import SleepingStatus, UpReport

if TYPE_CHECKING:  # annotations only
    from composegen.profiles.resolved import Resolved
    from composegen.project import Project


@app.command()
def up(
    name: str = ProfileArg,
    emulate: bool = typer.Option(
        False, "--emulate", help="Run the stack with the emulated vLLM (no GPU; a test double)."
    ),
    timeout: float | None = typer.Option(
        None,
        "--timeout",
        help="Seconds to wait for ready (default: the profile's startup_timeout).",
    ),
    no_wait: bool = typer.Option(
        False, "--no-wait", help="Start and return without waiting for ready."
    ),
    down_on_failure: bool = typer.Option(
        False, "--down-on-failure", help="Remove the stack when it fails to become ready."
    ),
    render_stale: bool = typer.Option(
        False, "--render", help="Render out/NAME first when it is stale."
    ),
    reclaim_shm: bool = typer.Option(
        False, "--reclaim-shm", help="Reclaim leftover /dev/shm files first (ipc: host)."
    ),
    allow_download: bool = typer.Option(
        False,
        "--allow-download",
        help="Start even if the pinned weights are incomplete (the engine downloads them).",
    ),
    verbose: bool = typer.Option(
        False, "--verbose", help="Preflight lines whole at a terminal too (not cut)."
    ),
    standby: bool = typer.Option(
        False,
        "--standby",
        help="Once ready and through its gates, put it to sleep (the profile's `standby:`).",
    ),
    json_: bool = JsonOpt,
) -> None:
    """Preflight, start and wait for a stack; print what the engine reported about its memory.

    Example: composegen up starter --emulate
    """
    check_seconds("--timeout", timeout)
    if standby and no_wait:
        raise BadInputError(
            "--standby waits for ready (the gates run, then the sleep): drop --no-wait"
        )
    show = Output(json_)
    # a Ctrl-C inside an import breaks libraries: held until they are loaded
    with deferred_sigint():
        driver.preload()
    project, r = _load(name)
    resident.plan_start(project, r, emulate, standby)  # standby stacks: do they fit in memory
    opts = driver.UpOptions(
        emulate, timeout, not no_wait, down_on_failure, render_stale, reclaim_shm
    )
    opts.allow_download = allow_download
    timeout_s = timeout or r.profile.service.startup_timeout
    with console_progress(quiet=show.json, timeout_s=timeout_s, verbose=verbose) as sink:
        sink.tracker.estimate_s = earlier_load_s(project, name)
        result = driver.start(project, r, opts, sink, timeout)
        if isinstance(result, str):  # already starting, and --no-wait: nothing to follow here
            return out(result)
    result = with_stages(result, sink)  # the engine's stages join the readiness phases
    if standby:
        result = _to_sleep(project, r, result, show)
    done = (
        f"{name}: started (not waiting); `composegen status {name}`"
        if no_wait
        else lambda: summary_text(result, terminal_width()) + _nodes_text(result)
    )
    show.report(result, done)


def _to_sleep(project: Project, r: Resolved, result: UpReport, show: Output) -> UpReport:
    if r.profile.standby is None:
        raise BadInputError(
            f"--standby: {r.name} has no `standby:` in its profile (composegen docs standby)"
        )
    was = driver.sleep_state(project, r)  # already asleep: put_to_sleep runs no gates
    asleep = resident.put_to_sleep(project, r)
    status = SleepingStatus(level=asleep.level, since=asleep.since, gpu_gib_held=asleep.residue_gib)
    held = (
        f"; the engine still holds {asleep.residue_gib:g} GiB of GPU memory"
        if asleep.residue_gib
        else ""
    )
    done = "already asleep, no gates run" if was else "gates passed, asleep"
    show.say(f"{r.name}: {done} (level {asleep.level}){held}")
    return result.model_copy(update={"asleep": status})


def _nodes_text(result: UpReport) -> str:
    """One line per node under the `up` summary of a multi-node stack."""
    return "".join(
        f"  node {n.name:<12} rank {n.rank} {n.role:<7} {n.engine}  ({n.project})\n"
        for n in result.nodes or []
    )


def check_seconds(option: str, value: float | None) -> None:
    """A duration option must be a finite positive number: nan, inf and negatives are refused (exit
    2)."""
    if value is not None and (not math.isfinite(value) or value <= 0):
        raise BadInputError(f"{option} must be a positive number of seconds, got {value:g}")
