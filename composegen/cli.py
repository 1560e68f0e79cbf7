"""The command line: parse arguments, call the core, print. Nothing else lives here.

Exit codes (one place, see errors.py): 0 ok, 1 check failed / differs, 2 bad input,
3 engine or stack failure, 130 Ctrl-C.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer

from composegen import __version__
from composegen.errors import BAD_INPUT, INTERRUPTED, RUNTIME, CheckFailed, ComposegenError
from composegen.errors import BadInput as BadInputError
from composegen.output import emit_json, err, out

app = typer.Typer(
    add_completion=True,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Profile YAMLs in, pinned Docker Compose stacks for vLLM out; and a driver for them.",
)
_state: dict = {"root": None}

JsonOpt = typer.Option(False, "--json", help="Machine-readable output (shape documented in the README).")


def _project():
    from composegen.project import find_project

    return find_project(_state["root"])


def _version(value: bool):
    if value:
        out(f"composegen {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    root: Optional[Path] = typer.Option(None, "--root", envvar="COMPOSEGEN_ROOT", help="Project root (holds profiles/)."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
):
    _state["root"] = root


# ---- profiles and rendering (no docker imports on these paths) --------------------------------


@app.command("list")
def list_(json_: bool = JsonOpt):
    """List the profiles and what each extends."""
    from composegen import profile

    resolved = profile.load_all(_project())
    rows = [{"name": r.name, "extends": r.chain[1:2][0] if len(r.chain) > 1 else None, "description": r.profile.description, "hash": r.hash} for r in resolved]
    if json_:
        return emit_json({"profiles": rows})
    from composegen.output import table

    out(table([[r["name"], r["extends"] or "-", r["description"]] for r in rows], ["NAME", "EXTENDS", "DESCRIPTION"]))


@app.command()
def validate(
    names: Optional[List[str]] = typer.Argument(None, help="Profiles to check (all by default)."),
    strict: bool = typer.Option(False, "--strict", help="Also fail on warnings such as an unpinned image."),
    json_: bool = JsonOpt,
):
    """Check profiles: schema, flags against the vLLM catalog, cross-field rules."""
    from composegen import profile

    resolved = profile.load_all(_project(), names)
    report = {"profiles": [{"name": r.name, "hash": r.hash, "warnings": r.warnings, "pinned": r.profile.pinned} for r in resolved]}
    if json_:
        emit_json(report)
    else:
        for r in resolved:
            out(f"ok  {r.name}")
            for w in r.warnings:
                out(f"    warning: {w}")
    if strict:
        unpinned = [r.name for r in resolved if not r.profile.pinned]
        if unpinned:
            raise CheckFailed(f"--strict: unpinned image in {', '.join(unpinned)}")
        if any(r.warnings for r in resolved):
            raise CheckFailed("--strict: warnings present")


@app.command()
def render(
    names: Optional[List[str]] = typer.Argument(None, help="Profiles to render (all by default)."),
    check: bool = typer.Option(False, "--check", help="Write nothing; exit 1 with a diff when out/ is stale."),
    json_: bool = JsonOpt,
):
    """Render out/<name>/compose.yaml from profiles/<name>.yaml."""
    from composegen import render as rendering

    project = _project()
    rendered = rendering.render_all(project, names)
    if check:
        drift = rendering.check(project, rendered, all_profiles=not names)
        if json_:
            emit_json({"fresh": not drift, "drift": [{"path": d.path, "reason": d.reason} for d in drift]})
        else:
            for d in drift:
                out(d.diff)
        if drift:
            raise CheckFailed(f"{len(drift)} file(s) in out/ are stale or orphaned", hint="run `composegen render`")
        if not json_:
            out(f"out/ is fresh ({len(rendered)} profiles)")
        return
    written = rendering.write(project, rendered)
    if json_:
        return emit_json({"written": written, "unchanged": len(rendered) - len(written)})
    for path in written:
        out(f"wrote {path}")
    out(f"{len(written)} written, {len(rendered) - len(written)} unchanged")


@app.command()
def show(name: str, json_: bool = JsonOpt):
    """The resolved profile and the container argv."""
    import shlex

    from composegen import profile

    r = profile.load(_project(), name)
    if json_:
        return emit_json(r.to_json())
    out(f"{r.name}  ({' <- '.join(r.chain)})  hash {r.hash}")
    out(f"  image    {r.profile.image}")
    out(f"  model    {r.profile.model.id} @ {r.profile.model.revision}")
    out(f"  served   {r.profile.model.served_name} on {r.profile.service.port.bind}:{r.profile.service.port.host}")
    out("  argv     " + " \\\n             ".join(_argv_lines(["vllm", "serve", *r.argv()])))
    for w in r.warnings:
        out(f"  warning  {w}")


def _argv_lines(argv: list[str]) -> list[str]:
    import shlex

    lines: list[str] = []
    for item in argv:
        if item.startswith("--") or not lines:
            lines.append(shlex.quote(item))
        else:
            lines[-1] += " " + shlex.quote(item)
    return lines


@app.command()
def schema():
    """Print the profile JSON Schema (generated from the model that validates)."""
    from composegen.schema import json_schema

    emit_json(json_schema())


@app.command()
def diff(
    a: str = typer.Argument(..., help="Profile name, compose file, or REF:path (e.g. HEAD~1:out/r33/compose.yaml)."),
    b: str = typer.Argument(...),
    functional_only: bool = typer.Option(False, "--functional-only", help="Exit status from functional changes alone."),
    unified: bool = typer.Option(False, "--unified", help="Plain unified diff of the two files."),
    json_: bool = JsonOpt,
):
    """Semantic diff of two stacks: every change classed functional or identity."""
    from composegen import diff as diffing

    project = _project()
    side_a, side_b = diffing.load_side(a, project.root), diffing.load_side(b, project.root)
    identity = diffing.identity_paths_for(project, [a, b])
    changes = diffing.compare(side_a.data, side_b.data, identity_paths=identity)
    if json_:
        emit_json([c.to_json() if hasattr(c, "to_json") else c for c in changes])
    elif unified:
        out(diffing.unified(side_a.text, side_b.text, side_a.label, side_b.label))
    else:
        out(diffing.format_text(changes, side_a.label, side_b.label))
    raise typer.Exit(diffing.exit_status(changes, functional_only))


def _click_exceptions():
    """Typer vendors click (typer._click) in recent releases; find its exception module either way."""
    try:
        from typer._click import exceptions  # type: ignore[attr-defined]
    except ImportError:  # older typer: plain click
        from click import exceptions
    return exceptions


# ---- driving stacks on the engine ------------------------------------------------------------


def _load(name: str):
    from composegen import profile

    project = _project()
    return project, profile.load(project, name)


@app.command()
def up(
    name: str,
    emulate: bool = typer.Option(False, "--emulate", help="Run the stack with the emulated vLLM (no GPU; a test double)."),
    timeout: Optional[float] = typer.Option(None, "--timeout", help="Seconds to wait for ready (default: the profile's startup_timeout)."),
    no_wait: bool = typer.Option(False, "--no-wait", help="Start and return without waiting for ready."),
    down_on_failure: bool = typer.Option(False, "--down-on-failure", help="Remove the stack when it fails to become ready."),
    render_stale: bool = typer.Option(False, "--render", help="Render out/NAME first when it is stale."),
    reclaim_shm: bool = typer.Option(False, "--reclaim-shm", help="Reclaim leftover /dev/shm files first (ipc: host)."),
    json_: bool = JsonOpt,
):
    """Preflight, start and wait for a stack; print what the engine reported about its memory."""
    from composegen import driver
    from composegen.console import console_progress, summary_text

    project, r = _load(name)
    opts = driver.UpOptions(emulate, timeout, not no_wait, down_on_failure, render_stale, reclaim_shm)
    result = driver.up(project, r, opts, console_progress(quiet=json_))
    if json_:
        return emit_json(result.to_json())
    out(summary_text(result) if not no_wait else f"{name}: started (not waiting); `composegen status {name}`")


@app.command()
def down(
    name: str,
    timeout: Optional[int] = typer.Option(None, "--timeout", help="Seconds to wait for a graceful stop (default: stop_grace_period)."),
    json_: bool = JsonOpt,
):
    """Stop and remove a stack, then report /dev/shm."""
    from composegen import driver, shm

    project, r = _load(name)
    result = driver.down(project, r, timeout)
    result["shm"] = shm.scan("/dev/shm") if r.profile.service.ipc == "host" else None
    if json_:
        return emit_json(result)
    out(f"{name}: removed {', '.join(result['removed']) or 'nothing (was not running)'}")
    if result["shm"]:
        out(shm.format_text(result["shm"]))


@app.command()
def status(name: Optional[str] = typer.Argument(None), json_: bool = JsonOpt):
    """Containers, endpoint and drift of composegen stacks on this engine."""
    from composegen import status as stat

    stacks = stat.stack_status(_project(), name)
    if json_:
        return emit_json({"stacks": stacks})
    out(stat.format_text(stacks))


@app.command()
def logs(
    name: str,
    follow: bool = typer.Option(False, "-f", "--follow"),
    tail: str = typer.Option("all", "--tail", help="Lines from the end (a number or all)."),
):
    """The stack's container logs."""
    from composegen import driver, engine

    project, r = _load(name)
    ctr = driver._vllm_container(driver.stack(project, r))
    if ctr is None:
        raise CheckFailed(f"{name} has no container on this engine")
    n = int(tail) if tail.isdigit() else "all"
    if not follow:
        return out(engine.logs(ctr, n))
    for chunk in engine.follow_logs(ctr, n):
        sys.stdout.write(chunk.decode("utf-8", "replace"))
        sys.stdout.flush()


@app.command()
def startup(
    name: Optional[str] = typer.Argument(None, help="A running stack's profile."),
    log: Optional[Path] = typer.Option(None, "--log", help="Parse a recorded vLLM startup log instead."),
    json_: bool = JsonOpt,
):
    """Parse vLLM's startup report: KV cache, concurrency, memory, errors, effective args."""
    from composegen import startup as parsing

    if log is not None:
        try:
            text = log.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise BadInputError(f"{log}: {exc.strerror}") from None
        report = parsing.parse_startup_log(text).to_json()
        if name:
            from composegen.driver import with_mismatches

            report = with_mismatches(_load(name)[1], report)
    else:
        if not name:
            raise BadInputError("give a profile name or --log FILE")
        from composegen import driver

        project, r = _load(name)
        ctr = driver._vllm_container(driver.stack(project, r))
        if ctr is None:
            raise CheckFailed(f"{name} has no container on this engine", hint=f"`composegen up {name}` first, or --log FILE")
        report = driver.startup_for(r, ctr)
    if json_:
        emit_json(report)
    else:
        out(parsing.format_text(report))
        for m in report.get("mismatches") or []:
            out(f"MISMATCH {m['flag']}: profile {m['profile']!r}, engine {m['engine']!r}")
    failures = [e for e in report.get("errors") or [] if e.get("kind") != "shm_broadcast_block"]
    if failures or not report.get("ready") or report.get("mismatches"):
        raise CheckFailed("the engine is not ready" if not report.get("ready") else "startup report has errors or mismatches")


@app.command()
def shm(
    path: str = typer.Option("/dev/shm", "--path", help="Directory to inspect."),
    container: Optional[str] = typer.Option(None, "--container", help="A running container's private /dev/shm."),
    reclaim: bool = typer.Option(False, "--reclaim", help="Preview (or with --yes, remove) leftover files."),
    yes: bool = typer.Option(False, "--yes", help="With --reclaim: really remove."),
    include_unknown: bool = typer.Option(False, "--include-unknown", help="With --reclaim: also unknown names nothing holds."),
    ignore_unreadable: bool = typer.Option(False, "--ignore-unreadable", help="Reclaim even though some processes could not be checked."),
    fail_on_leftover: bool = typer.Option(False, "--fail-on-leftover", help="Exit 1 when leftovers are present (CI, cron)."),
    json_: bool = JsonOpt,
):
    """Who holds what in /dev/shm, and a safe reclaim of what nothing uses."""
    from composegen import shm as shared

    if reclaim:
        result = shared.reclaim(path, yes=yes, include_unknown=include_unknown, ignore_unreadable=ignore_unreadable)
        return emit_json(result) if json_ else out(shared.format_reclaim_text(result))
    report = shared.container_shm(container) if container else shared.scan(path)
    if json_:
        emit_json(report)
    else:
        out(shared.format_text(report))
    code = shared.scan_exit_code(report, fail_on_leftover=fail_on_leftover)
    if code:
        raise CheckFailed(f"{report['totals']['leftover']['count']} leftover file(s) in {report['path']}")


# ---- evidence: gates, ladder, bundles, comparison, planning, qualification -------------------


def _ints(text: str) -> list[int]:
    try:
        return [int(t.replace("_", "")) for t in text.split(",") if t.strip()]
    except ValueError:
        raise BadInputError(f"--targets/--ladder: expected comma-separated integers, got {text!r}") from None


@app.command()
def gate(
    name: str,
    tools: int = typer.Option(20, "--tools", help="Typed tools to exercise (N/N must pass)."),
    only: Optional[str] = typer.Option(None, "--only", help="Comma-separated gates: smoke,json,tools,stream_tools,continuation,responses."),
    json_: bool = JsonOpt,
):
    """Functional gates against the running stack (official openai client). Exit 1 when any fails."""
    from composegen import driver, gates

    _, r = _load(name)
    ep = driver.endpoint(r)
    result = gates.run_gates(ep.base_url, r.profile.model.served_name, api_key=ep.api_key, tools=tools, only=only)
    emit_json(result) if json_ else out(gates.format_text(result))
    if not result["ok"]:
        raise CheckFailed(f"{result['total'] - result['passed']} of {result['total']} gates failed")


@app.command()
def ladder(
    name: str,
    targets: str = typer.Option(..., "--targets", help="Prompt sizes in tokens, e.g. 117500,118500,119500."),
    max_tokens: int = typer.Option(64, "--max-tokens"),
    json_: bool = JsonOpt,
):
    """Context ladder: prompts sized with /tokenize; TTFT, prefill and decode rates."""
    from composegen import driver
    from composegen import ladder as ladders

    _, r = _load(name)
    ep = driver.endpoint(r)
    result = ladders.run_ladder(ep.base_url, r.profile.model.served_name, _ints(targets), max_model_len=r.flag("max-model-len"), max_tokens=max_tokens, api_key=ep.api_key)
    emit_json(result) if json_ else out(ladders.format_text(result))
    if not result["ok"]:
        raise CheckFailed("a ladder target failed")


@app.command()
def evidence(
    name: Optional[str] = typer.Argument(None, help="A running stack's profile."),
    gate_: bool = typer.Option(False, "--gate", help="Also run the gates."),
    ladder_: Optional[str] = typer.Option(None, "--ladder", help="Also run a ladder at these targets."),
    from_log: Optional[Path] = typer.Option(None, "--from-log", help="Build a run from a startup log recorded elsewhere."),
    profile_name: Optional[str] = typer.Option(None, "--profile", help="With --from-log: the profile of that run."),
):
    """Write runs/<utc-time>-<name>/ (evidence.json + raw files with sha256) and print its path."""
    from composegen import evidence as bundles

    project = _project()
    if from_log is not None:
        if not profile_name:
            raise BadInputError("--from-log needs --profile NAME")
        path = bundles.from_log(project, profile_name, from_log)
    else:
        if not name:
            raise BadInputError("give a profile name, or --from-log FILE --profile NAME")
        r = _load(name)[1]
        path = bundles.capture_stack(project, r, gate=gate_, ladder_targets=_ints(ladder_) if ladder_ else None)
    out(project.rel(path))


@app.command()
def compare(
    run_a: str,
    run_b: str,
    markdown: bool = typer.Option(False, "--markdown", help="The Results table as Markdown."),
    threshold: float = typer.Option(0.10, "--threshold", help="Flag when KV token and byte changes disagree by more than this."),
    json_: bool = JsonOpt,
):
    """The A/B Results table of two runs, their config differences, and the unexplained-capacity flag."""
    from composegen import compare as comparing

    result = comparing.compare_runs(run_a, run_b, root=_project().root, threshold=threshold)
    if json_:
        emit_json(result)
    else:
        out(comparing.format_markdown(result) if markdown else comparing.format_text(result))


@app.command()
def plan(
    name: str,
    from_run: Optional[str] = typer.Option(None, "--from", help="A run bundle to calibrate from."),
    from_log: Optional[Path] = typer.Option(None, "--from-log", help="A vLLM startup log to calibrate from."),
    gpu_gib: Optional[float] = typer.Option(None, "--gpu-gib", help="GPU memory per device, when the log does not say."),
    json_: bool = JsonOpt,
):
    """Predict the KV pool of a profile from earlier evidence (a prediction, never a measurement)."""
    from composegen import plan as planning

    if (from_run is None) == (from_log is None):
        raise BadInputError("give exactly one of --from RUN or --from-log FILE")
    project, r = _load(name)
    report, cal = planning.calibration_from(project, run=from_run, log_path=from_log)
    result = planning.plan(r, report, gpu_gib=gpu_gib, calibration_profile=cal)
    emit_json(result) if json_ else out(planning.format_text(result))


@app.command()
def qualify(name: str, json_: bool = JsonOpt):
    """Judge the running stack against the profile's `qualify:` criteria; writes an evidence bundle."""
    from composegen import qualify as qualifying

    project, r = _load(name)
    result = qualifying.qualify_stack(project, r)
    emit_json(result) if json_ else out(qualifying.format_text(result))
    if qualifying.exit_code(result):
        raise CheckFailed(f"{name} is not qualified")


def main() -> None:
    click_exc = _click_exceptions()
    try:
        rc = app(standalone_mode=False)
    except ComposegenError as exc:
        err(f"composegen: {exc.message}" if not exc.message.startswith(("profiles/", "out/", "/")) else exc.message)
        if exc.details:
            err(exc.details)
        if exc.hint:
            err(f"hint: {exc.hint}")
        sys.exit(exc.exit_code)
    except (KeyboardInterrupt, getattr(click_exc, "Abort", KeyboardInterrupt)):
        err("composegen: interrupted")
        sys.exit(INTERRUPTED)
    except click_exc.ClickException as exc:
        exc.show()
        # A bare `composegen` shows help: that is not an error.
        sys.exit(0 if type(exc).__name__ == "NoArgsIsHelpError" else BAD_INPUT)
    except Exception as exc:  # noqa: BLE001 - the one place an unexpected error becomes a message
        log = _crash_log(exc)
        err(f"composegen: internal error: {type(exc).__name__}: {exc} (traceback in {log})")
        sys.exit(RUNTIME)
    sys.exit(rc or 0)


def _crash_log(exc: BaseException) -> str:
    import os
    import tempfile
    import traceback

    path = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "composegen" / "crash.log"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(traceback.format_exception(exc)), encoding="utf-8")
    except OSError:
        path = Path(tempfile.gettempdir()) / "composegen-crash.log"
        path.write_text("".join(traceback.format_exception(exc)), encoding="utf-8")
    return str(path)
