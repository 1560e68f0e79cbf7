"""Commands that drive stacks on the Docker engine: up, down, status, logs, startup, shm."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from composegen.cli.app import JsonOpt, app
from composegen.cli.app import load_profile as _load
from composegen.cli.app import project as _project
from composegen.errors import BadInput as BadInputError
from composegen.errors import CheckFailed, EngineError
from composegen.output import emit_json, out


@app.command()
def up(
    name: str,
    emulate: bool = typer.Option(
        False, "--emulate", help="Run the stack with the emulated vLLM (no GPU; a test double)."
    ),
    timeout: float | None = typer.Option(
        None, "--timeout", help="Seconds to wait for ready (default: the profile's startup_timeout)."
    ),
    no_wait: bool = typer.Option(False, "--no-wait", help="Start and return without waiting for ready."),
    down_on_failure: bool = typer.Option(
        False, "--down-on-failure", help="Remove the stack when it fails to become ready."
    ),
    render_stale: bool = typer.Option(False, "--render", help="Render out/NAME first when it is stale."),
    reclaim_shm: bool = typer.Option(False, "--reclaim-shm", help="Reclaim leftover /dev/shm files first (ipc: host)."),
    json_: bool = JsonOpt,
):
    """Preflight, start and wait for a stack; print what the engine reported about its memory."""
    from composegen.cli.console import console_progress, summary_text
    from composegen.stack import driver

    if timeout is not None and timeout <= 0:
        raise BadInputError(f"--timeout must be a positive number of seconds, got {timeout:g}")
    project, r = _load(name)
    opts = driver.UpOptions(emulate, timeout, not no_wait, down_on_failure, render_stale, reclaim_shm)
    result = driver.up(project, r, opts, console_progress(quiet=json_))
    if json_:
        return emit_json(result.to_json())
    if no_wait:
        return out(f"{name}: started (not waiting); `composegen status {name}`")
    if r.profile.nodes:
        from composegen.stack import multinode

        return out(multinode.format_text(result))
    out(summary_text(result))


@app.command()
def down(
    name: str,
    timeout: int | None = typer.Option(
        None, "--timeout", help="Seconds to wait for a graceful stop (default: stop_grace_period)."
    ),
    json_: bool = JsonOpt,
):
    """Stop and remove a stack, then report /dev/shm."""
    from composegen.shm import scan as shm
    from composegen.stack import driver
    from composegen.stack import status as stat

    project, r = _load(name)
    result = driver.down(project, r, timeout)
    if r.profile.nodes:
        result["shm"] = stat.node_shm_report(r)
    else:
        result["shm"] = shm.scan("/dev/shm") if r.profile.service.ipc == "host" else None
    if json_:
        return emit_json(result)
    out(f"{name}: removed {', '.join(result['removed']) or 'nothing (was not running)'}")
    if result["shm"]:
        out(stat.format_node_shm_text(result["shm"]) if r.profile.nodes else shm.format_text(result["shm"]))


@app.command()
def status(name: str | None = typer.Argument(None), json_: bool = JsonOpt):
    """Containers, endpoint and drift of composegen stacks on this engine."""
    from composegen.stack import status as stat

    if name:
        _load(name)  # an unknown profile is bad input (2), not "nothing running"
    stacks = stat.stack_status(_project(), name)
    if json_:
        return emit_json({"stacks": stacks})
    out(stat.format_text(stacks))


@app.command()
def logs(
    name: str,
    follow: bool = typer.Option(False, "-f", "--follow"),
    tail: str = typer.Option("all", "--tail", help="Lines from the end (a number or all)."),
    node: str | None = typer.Option(
        None, "--node", help="Multi-node: this node's logs (default: every node; with -f the head)."
    ),
):
    """The stack's container logs."""
    from composegen.stack import driver, engine, multinode

    project, r = _load(name)
    n = int(tail) if tail.isdigit() else "all"
    if r.profile.nodes:
        if not follow:
            return out(multinode.logs_text(project, r, n, node))
        ctr = multinode.node_container(project, r, node)
    else:
        ctr = driver.vllm_container(driver.stack(project, r))
    if ctr is None:
        raise EngineError(f"{name} has no container on this engine", hint=f"`composegen up {name}` first")
    if not follow:
        return out(engine.logs(ctr, n))
    for chunk in engine.follow_logs(ctr, n):
        sys.stdout.write(chunk.decode("utf-8", "replace"))
        sys.stdout.flush()


@app.command()
def startup(
    name: str | None = typer.Argument(None, help="A running stack's profile."),
    log: Path | None = typer.Option(None, "--log", help="Parse a recorded vLLM startup log instead."),
    json_: bool = JsonOpt,
):
    """Parse vLLM's startup report: KV cache, concurrency, memory, errors, effective args."""
    from composegen.vllm import startup as parsing

    if log is not None:
        try:
            text = log.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise BadInputError(f"{log}: {exc.strerror}") from None
        report = parsing.parse_startup_log(text).to_json()
        if name:
            from composegen.stack.driver import with_mismatches

            report = with_mismatches(_load(name)[1], report)
    else:
        if not name:
            raise BadInputError("give a profile name or --log FILE")
        from composegen.stack import driver

        project, r = _load(name)
        report = driver.startup_for(r, driver.running_container(project, r))
    if json_:
        emit_json(report)
    else:
        out(parsing.format_text(report))
        for m in report.get("mismatches") or []:
            out(f"MISMATCH {m['flag']}: profile {m['profile']!r}, engine {m['engine']!r}")
    failures = [e for e in report.get("errors") or [] if e.get("kind") not in parsing.WARNING_KINDS]
    if failures or not report.get("ready") or report.get("mismatches"):
        raise CheckFailed(
            "the engine is not ready" if not report.get("ready") else "startup report has errors or mismatches"
        )


@app.command()
def shm(
    path: str | None = typer.Option(None, "--path", help="Directory to inspect (default /dev/shm)."),
    container: str | None = typer.Option(None, "--container", help="A running container's private /dev/shm."),
    profile_name: str | None = typer.Option(
        None, "--profile", help="Multi-node: /dev/shm of every node of this profile."
    ),
    reclaim: bool = typer.Option(False, "--reclaim", help="Preview (or with --yes, remove) leftover files."),
    yes: bool = typer.Option(False, "--yes", help="With --reclaim: really remove."),
    include_unknown: bool = typer.Option(
        False, "--include-unknown", help="With --reclaim: also unknown names nothing holds."
    ),
    ignore_unreadable: bool = typer.Option(
        False, "--ignore-unreadable", help="Reclaim even though some processes could not be checked."
    ),
    fail_on_leftover: bool = typer.Option(
        False, "--fail-on-leftover", help="Exit 1 when leftovers are present (CI, cron)."
    ),
    json_: bool = JsonOpt,
):
    """Who holds what in /dev/shm, and a safe reclaim of what nothing uses."""
    from composegen.shm import scan as shared

    _check_shm_options(path, container, profile_name, reclaim, yes, include_unknown, ignore_unreadable)
    path = "/dev/shm" if path is None else path
    if profile_name:
        from composegen.stack import status as stat

        r = _load(profile_name)[1]
        if r.profile.nodes is None:
            raise BadInputError(
                f"--profile {profile_name}: not a multi-node profile; inspect its host with plain `composegen shm`"
            )
        report = stat.node_shm_report(r)
        return emit_json(report) if json_ else out(stat.format_node_shm_text(report))
    if reclaim:
        from composegen.shm import reclaim as shm_reclaim

        result = shm_reclaim.reclaim(
            path, yes=yes, include_unknown=include_unknown, ignore_unreadable=ignore_unreadable
        )
        emit_json(result) if json_ else out(shm_reclaim.format_reclaim_text(result))
        left = (
            (result["remaining"] or {}).get("totals", {}).get("leftover", {}).get("count")
            if yes
            else len(result["candidates"])
        )
        if fail_on_leftover and left:
            raise CheckFailed(f"{left} leftover file(s) {'remain' if yes else 'present'} in {path}")
        return
    if container:
        return shared.print_scan(shared.container_shm(container), as_json=json_, fail_on_leftover=fail_on_leftover)
    shared.print_path_scan(path, as_json=json_, fail_on_leftover=fail_on_leftover)


def _check_shm_options(path, container, profile_name, reclaim, yes, include_unknown, ignore_unreadable) -> None:
    """Options that would silently mean something else are refused (exit 2), not ignored."""
    where = [
        flag for flag, given in (("--path", path), ("--container", container), ("--profile", profile_name)) if given
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
        )
        if given
    ]
    if modifiers and not reclaim:
        raise BadInputError(f"{', '.join(modifiers)}: only meaningful with --reclaim")
