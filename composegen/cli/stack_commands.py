"""Commands that look after a stack on the Docker engine: down, status, logs, startup (`up` is
up_command.py, `shm` shm_commands.py).

cli/main.py loads this module only when a run names one of them (or lists every command), under its
Ctrl-C guard, so what they need is imported at top level; the docker libraries load when a command
first talks to an engine (driver.preload, stack/engine.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from composegen.cli.app import JsonOpt, ProfileArg, StackArg, app
from composegen.cli.app import load_profile as _load
from composegen.cli.app import project as _project
from composegen.cli.optiongroups import option, profile_arg
from composegen.edge import config as edge_config
from composegen.edge import routes as edge_routes
from composegen.errors import BadInput as BadInputError
from composegen.errors import CheckFailed, EngineError
from composegen.output import Output, mask, out, terminal_width
from composegen.stack import driver
from composegen.stack.reports import AliasTarget
from composegen.vllm import startup as parsing
from composegen.vllm.startup import StartupCheck, StartupReport


@app.command()
def down(
    name: str = ProfileArg,
    timeout: int | None = option(
        None, "--timeout", "Seconds to wait for a graceful stop (default: stop_grace_period)."
    ),
    json_: bool = JsonOpt,
) -> None:
    """Stop and remove a stack, then report /dev/shm.

    Example: composegen down starter
    """
    if timeout is not None and timeout < 0:
        msg = f"--timeout must be zero or a positive number of seconds, got {timeout}"
        raise BadInputError(msg)
    project, r = _load(name)
    result = driver.down(project, r, timeout)
    if edge_config.configured(project):  # clients of an alias on NAME: down since when
        edge_routes.mark_down(project, name)
    removed = [*result.removed, *(f"network {x}" for x in result.networks)]
    said = f"{name}: removed {', '.join(removed) or 'nothing (was not running)'}"
    shm_text = driver.shm_text(result)
    Output(json_).report(result, said + (f"\n{shm_text}" if shm_text else ""))


@app.command()
def status(
    name: str | None = profile_arg("Only this profile's stack; exit 3 when it is not running."),
    every: bool = typer.Option(False, "--all", help="Every project's stacks on this engine."),
    json_: bool = JsonOpt,
) -> None:
    """Containers, endpoint and drift of this project's stacks (--all: every project's).

    Example: composegen status starter
    """
    if name:
        _load(name)  # an unknown profile is bad input (2), not "nothing running"
    report = driver.status(_project(), name, every)
    edge = _edge_status()
    report.aliases = edge[1] if edge else None
    show = Output(json_)
    if name and not report.stacks:  # nothing of it on the engine: the error line below says so
        show.report(report)
    else:
        show.report(report, lambda: driver.status_text(report, terminal_width()))
        show.say(edge[0] if edge else "")
    if name and not any(c.state == "running" for s in report.stacks for c in s.containers):
        emulated = any(c.emulated for s in report.stacks for c in s.containers)
        msg = f"{name} is not running"
        raise EngineError(msg, hint=f"`composegen up {name}{' --emulate' * emulated}` starts it")
    lost = [n for s in report.stacks for n in s.nodes or [] if not n.reachable]
    # a multi-node stack missing a node cannot serve: as docs/commands.md says, exit 3
    if name and lost:
        said = ", ".join(f"node {n.name} ({n.engine})" for n in lost)
        msg = f"{name}: {said} unreachable"
        raise EngineError(msg, hint="check that node's engine; `composegen down` stops the rest")


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
    node: str | None = option(
        None, "--node", "Multi-node: this node's logs (default: every node; with -f the head)."
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
    name: str | None = profile_arg("A running stack's profile."),
    log: Path | None = option(None, "--log", "Parse a recorded vLLM startup log instead."),
    json_: bool = JsonOpt,
) -> None:
    """Parse vLLM's startup report: KV cache, concurrency, memory, errors, effective args.

    Example: composegen startup --log vllm-startup.log 8192-131k  # in composegen's clone, a vLLM log saved
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
    show = Output(json_)
    show.report(report, lambda: parsing.format_text(report))
    for m in mismatches or []:
        show.say(f"MISMATCH {m.flag}: profile {m.profile!r}, engine {m.engine!r}")
    failures = [e for e in report.errors if e.kind not in parsing.WARNING_KINDS]
    if failures or not report.ready or mismatches:
        raise CheckFailed(
            "the engine is not ready"
            if not report.ready
            else "startup report has errors or mismatches"
        )
