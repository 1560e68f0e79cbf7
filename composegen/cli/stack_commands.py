"""Commands that drive stacks on the Docker engine: up, down, status, logs, startup, shm.

cli/main.py loads this module only when a run names one of them (or lists every command), under its
Ctrl-C guard, so what they need is imported at top level; the docker libraries load when a command
first talks to an engine (driver.preload, stack/engine.py).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from composegen.cli import shm_output
from composegen.cli.app import JsonOpt, ProfileArg, StackArg, app, complete_profile
from composegen.cli.app import load_profile as _load
from composegen.cli.app import project as _project
from composegen.cli.console import console_progress, earlier_load_s, summary_text, with_stages
from composegen.cli.fastpath import ContainerLabels
from composegen.cli.interrupts import deferred_sigint
from composegen.edge import config as edge_config
from composegen.edge import routes as edge_routes
from composegen.edge import standby as resident
from composegen.errors import BadInput as BadInputError
from composegen.errors import CheckFailed, EngineError
from composegen.output import emit_json, mask, out, terminal_width
from composegen.shm import reclaim as reclaiming
from composegen.stack import driver
from composegen.stack.reports import AliasTarget, SleepingStatus, UpReport
from composegen.vllm import startup as parsing
from composegen.vllm.startup import StartupCheck, StartupReport

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
    _check_seconds("--timeout", timeout)
    if standby and no_wait:
        raise BadInputError(
            "--standby waits for ready (the gates run, then the sleep): drop --no-wait"
        )
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
    with console_progress(quiet=json_, timeout_s=timeout_s, verbose=verbose) as sink:
        sink.tracker.estimate_s = earlier_load_s(project, name)
        result = driver.start(project, r, opts, sink, timeout)
        if isinstance(result, str):  # already starting, and --no-wait: nothing to follow here
            return out(result)
    result = with_stages(result, sink)  # the engine's stages join the readiness phases
    if standby:
        result = _to_sleep(project, r, result, json_)
    if json_:
        return emit_json(result.to_json())
    if no_wait:
        return out(f"{name}: started (not waiting); `composegen status {name}`")
    out(summary_text(result, terminal_width()) + _nodes_text(result))


def _to_sleep(project: Project, r: Resolved, result: UpReport, json_: bool) -> UpReport:
    if r.profile.standby is None:
        raise BadInputError(
            f"--standby: {r.name} has no `standby:` in its profile (composegen docs standby)"
        )
    was = driver.sleep_state(project, r)  # already asleep: put_to_sleep runs no gates
    asleep = resident.put_to_sleep(project, r)
    status = SleepingStatus(level=asleep.level, since=asleep.since, gpu_gib_held=asleep.residue_gib)
    if not json_:
        held = (
            f"; the engine still holds {asleep.residue_gib:g} GiB of GPU memory"
            if asleep.residue_gib
            else ""
        )
        done = "already asleep, no gates run" if was else "gates passed, asleep"
        out(f"{r.name}: {done} (level {asleep.level}){held}")
    return result.model_copy(update={"asleep": status})


def _nodes_text(result: UpReport) -> str:
    """One line per node under the `up` summary of a multi-node stack."""
    return "".join(
        f"  node {n.name:<12} rank {n.rank} {n.role:<7} {n.engine}  ({n.project})\n"
        for n in result.nodes or []
    )


def _check_seconds(option: str, value: float | None) -> None:
    """A duration option must be a finite positive number: nan, inf and negatives are refused (exit
    2)."""
    if value is not None and (not math.isfinite(value) or value <= 0):
        raise BadInputError(f"{option} must be a positive number of seconds, got {value:g}")


@app.command()
def down(
    name: str = ProfileArg,
    timeout: int | None = typer.Option(
        None, "--timeout", help="Seconds to wait for a graceful stop (default: stop_grace_period)."
    ),
    json_: bool = JsonOpt,
) -> None:
    """Stop and remove a stack, then report /dev/shm.

    Example: composegen down starter
    """
    if timeout is not None and timeout < 0:
        raise BadInputError(
            f"--timeout must be zero or a positive number of seconds, got {timeout}"
        )
    project, r = _load(name)
    result = driver.down(project, r, timeout)
    _mark_down(name)
    if json_:
        return emit_json(result.to_json())
    removed = [*result.removed, *(f"network {x}" for x in result.networks)]
    out(f"{name}: removed {', '.join(removed) or 'nothing (was not running)'}")
    shm_text = driver.shm_text(result)
    if shm_text:
        out(shm_text)


@app.command()
def status(
    name: str | None = typer.Argument(
        None,
        help="Only this profile's stack; exit 3 when it is not running.",
        autocompletion=complete_profile,
    ),
    json_: bool = JsonOpt,
) -> None:
    """Containers, endpoint and drift of composegen stacks on this engine.

    Example: composegen status starter
    """
    if name:
        _load(name)  # an unknown profile is bad input (2), not "nothing running"
    report = driver.status(_project(), name)
    edge = _edge_status()
    if json_:
        report.aliases = edge[1] if edge else None
        emit_json(report.to_json())
    # a named stack with nothing on the engine: the error line says it
    elif report.stacks or not name:
        out(driver.status_text(report, terminal_width()))
        if edge:
            out(edge[0])
    if name and not any(c.state == "running" for s in report.stacks for c in s.containers):
        emulated = any(c.emulated for s in report.stacks for c in s.containers)
        raise EngineError(
            f"{name} is not running",
            hint=f"`composegen up {name}{' --emulate' * emulated}` starts it",
        )
    lost = [n for s in report.stacks for n in s.nodes or [] if not n.reachable]
    # a multi-node stack missing a node cannot serve: as docs/commands.md says, exit 3
    if name and lost:
        said = ", ".join(f"node {n.name} ({n.engine})" for n in lost)
        raise EngineError(
            f"{name}: {said} unreachable",
            hint="check that node's engine; `composegen down` stops the rest",
        )


def _mark_down(name: str) -> None:
    """Clients of an alias on NAME are told since when it is down (docs/edge.md)."""
    project = _project()
    if edge_config.configured(project):
        edge_routes.mark_down(project, name)


def _edge_status() -> tuple[str, list[AliasTarget]] | None:
    """The edge's block under the stacks and its aliases for `--json`, when the project has an edge
    (docs/edge.md); `edge status --json` has the rest."""
    # why: only `status` draws the edge; the other commands skip ~10 modules
    from composegen.edge import config

    project = _project()
    if not config.configured(project):
        return None
    # why: as above, and only with an edge
    from composegen.edge.status import alias_targets, edge_status, format_text

    report = edge_status(project)
    return format_text(report), alias_targets(report)


@app.command()
def logs(
    name: str = StackArg,
    follow: bool = typer.Option(
        False, "-f", "--follow", help="Keep printing new lines until Ctrl-C."
    ),
    tail: str = typer.Option("all", "--tail", help="Lines from the end (a number or all)."),
    node: str | None = typer.Option(
        None, "--node", help="Multi-node: this node's logs (default: every node; with -f the head)."
    ),
) -> None:
    """The stack's container logs.

    Example: composegen logs starter -f --tail 50
    """
    project, r = _load(name)
    n = int(tail) if tail.isdigit() else "all"
    if not follow:
        return out(driver.logs_text(project, r, n, node))
    for chunk in driver.follow_logs(project, r, n, node):
        sys.stdout.write(mask(chunk.decode("utf-8", "replace")))
        sys.stdout.flush()


@app.command()
def startup(
    name: str | None = typer.Argument(
        None, help="A running stack's profile.", autocompletion=complete_profile
    ),
    log: Path | None = typer.Option(
        None, "--log", help="Parse a recorded vLLM startup log instead."
    ),
    json_: bool = JsonOpt,
) -> None:
    """Parse vLLM's startup report: KV cache, concurrency, memory, errors, effective args.

    Example: composegen startup --log vllm-startup.log 8192-131k
    """
    report: StartupReport
    if log is not None:
        try:
            with open(log, "rb") as stream:  # bounded: constant memory whatever the file is
                report = parsing.parse_startup_stream(stream)
        except OSError as exc:
            raise BadInputError(f"{log}: {exc.strerror}") from None
        if name:
            report = driver.checked_startup(_load(name)[1], report)
    else:
        if not name:
            raise BadInputError("give a profile name or --log FILE")
        project, r = _load(name)
        report = driver.startup_check(r, driver.running_container(project, r))
    # no profile: nothing compared
    mismatches = report.mismatches if isinstance(report, StartupCheck) else None
    if json_:
        emit_json(report.to_json())
    else:
        out(parsing.format_text(report))
        for m in mismatches or []:
            out(f"MISMATCH {m.flag}: profile {m.profile!r}, engine {m.engine!r}")
    failures = [e for e in report.errors if e.kind not in parsing.WARNING_KINDS]
    if failures or not report.ready or mismatches:
        raise CheckFailed(
            "the engine is not ready"
            if not report.ready
            else "startup report has errors or mismatches"
        )


@app.command()
def shm(
    path: str | None = typer.Option(
        None, "--path", help="Directory to inspect (default /dev/shm)."
    ),
    container: str | None = typer.Option(
        None, "--container", help="A running container's private /dev/shm."
    ),
    profile_name: str | None = typer.Option(
        None,
        "--profile",
        help="Multi-node: /dev/shm of every node of this profile.",
        autocompletion=complete_profile,
    ),
    reclaim: bool = typer.Option(
        False, "--reclaim", help="Preview (or with --yes, remove) leftover files."
    ),
    yes: bool = typer.Option(False, "--yes", help="With --reclaim: really remove."),
    include_unknown: bool = typer.Option(
        False, "--include-unknown", help="With --reclaim: also unknown names nothing holds."
    ),
    ignore_unreadable: bool = typer.Option(
        False,
        "--ignore-unreadable",
        help="Reclaim even though some processes could not be checked.",
    ),
    min_age: float | None = typer.Option(
        None,
        "--min-age",
        metavar="SECONDS",
        help="With --reclaim: leave files whose mtime or ctime is newer than this (default 60).",
    ),
    force: bool = typer.Option(False, "--force", help="Accept a --path that is not a tmpfs."),
    fail_on_leftover: bool = typer.Option(
        False, "--fail-on-leftover", help="Exit 1 when leftovers are present (CI, cron)."
    ),
    json_: bool = JsonOpt,
) -> None:
    """Who holds what in /dev/shm, and a safe reclaim of what nothing uses (composegen docs shm).

    `--reclaim` alone previews what it would remove; add --yes to remove it.

    Example: composegen shm --reclaim
    """
    _check_shm_options(
        path, container, profile_name, reclaim, yes, include_unknown, ignore_unreadable, min_age
    )
    if force and (container or profile_name):
        raise BadInputError("--force: only meaningful with --path (or the default /dev/shm)")
    path = "/dev/shm" if path is None else path
    labels = ContainerLabels()
    if profile_name:
        nodes, text = driver.shm_report(_load(profile_name)[1])
        return emit_json(nodes.to_json()) if json_ else out(text)
    if reclaim:
        result = reclaiming.reclaim(
            path,
            yes=yes,
            include_unknown=include_unknown,
            ignore_unreadable=ignore_unreadable,
            min_age=reclaiming.DEFAULT_MIN_AGE if min_age is None else min_age,
            force=force,
            container_labels=labels,
        )
        return shm_output.print_reclaim(result, as_json=json_, fail_on_leftover=fail_on_leftover)
    if container:
        report = driver.container_shm(container, labels)
        return shm_output.print_scan(report, as_json=json_, fail_on_leftover=fail_on_leftover)
    shm_output.print_path_scan(
        path, as_json=json_, fail_on_leftover=fail_on_leftover, force=force, container_labels=labels
    )


def _check_shm_options(
    path: str | None,
    container: str | None,
    profile_name: str | None,
    reclaim: bool,
    yes: bool,
    include_unknown: bool,
    ignore_unreadable: bool,
    min_age: float | None,
) -> None:
    """Options that would silently mean something else are refused (exit 2), not ignored."""
    where = [
        flag
        for flag, given in (
            ("--path", path),
            ("--container", container),
            ("--profile", profile_name),
        )
        if given
    ]
    if len(where) > 1:
        raise BadInputError(f"{' and '.join(where)} name different places: give one")
    if reclaim and (container or profile_name):
        raise BadInputError(
            "--reclaim works on a host directory (--path); a private /dev/shm goes away with its container"
        )
    modifiers = [
        flag
        for flag, given in (
            ("--yes", yes),
            ("--include-unknown", include_unknown),
            ("--ignore-unreadable", ignore_unreadable),
            ("--min-age", min_age is not None),
        )
        if given
    ]
    if modifiers and not reclaim:
        raise BadInputError(f"{', '.join(modifiers)}: only meaningful with --reclaim")
