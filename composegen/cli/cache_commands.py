"""`composegen cache list|verify|prune|export|import|warm`: the compile-cache volumes (docs/caches.md).
`cache warm` is issue 47's `up --warm-only`: `up` is at its option budget, so it lives here."""

from __future__ import annotations

from pathlib import Path

import typer

from composegen.cli.app import JsonOpt, ProfileArg, app
from composegen.cli.app import load_profile as _load
from composegen.cli.app import project as _project
from composegen.cli.console import ConsoleSink
from composegen.cli.readysummary import summary_text
from composegen.errors import CheckFailed
from composegen.interrupts import deferred
from composegen.output import Output, terminal_width
from composegen.stack import driver
from composegen.stack.reports import CacheReport
from composegen.units import format_bytes

cache_app = typer.Typer(
    help="The compile caches kept per key: list, verify, prune, export, import, warm.\n\n"
    "Example: composegen cache list",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(cache_app, name="cache")


@cache_app.command("list")
def list_(json_: bool = JsonOpt) -> None:
    """Every cache volume on the engine: key, size, last use, which profiles used and render it."""
    _said(driver.cache_volumes(_project(), "list"), json_)


@cache_app.command()
def verify(
    name: str | None = typer.Argument(None, help="One profile (default: every profile here)."),
    json_: bool = JsonOpt,
) -> None:
    """Do the profiles' cache volumes still match this host (the image that filled them, GPUs)?"""
    report = _said(driver.cache_volumes(_project(), "verify", name), json_)
    if bad := [v.volume for v in report.volumes if v.problems]:
        raise CheckFailed(f"{', '.join(bad)}: no longer match this host (MISMATCH above)")


@cache_app.command()
def prune(
    days: int | None = typer.Option(None, "--unused-days", min=0, help="Or unused here N days."),
    yes: bool = typer.Option(False, "--yes", help="Remove them (default: say which)."),
    json_: bool = JsonOpt,
) -> None:
    """This project's volumes no profile renders any more: said, or removed with --yes. Never
    another project's, nor one a container mounts."""
    _said(driver.cache_prune(_project(), days, yes), json_)


@cache_app.command("export")
def export(
    key: str = typer.Argument(..., help="The cache key (`cache list`)."),
    file: Path = typer.Argument(..., help="A new tar file."),
    json_: bool = JsonOpt,
) -> None:
    """KEY's volume into a tar with its key and each file's sha256 (links are left out)."""
    _said(driver.cache_export(_project(), key, file), json_)


@cache_app.command("import")
def import_(
    file: Path = typer.Argument(..., help="A `cache export` tar."), json_: bool = JsonOpt
) -> None:
    """An export into a new volume when a profile here renders its key (else exit 1; an unsafe
    or damaged archive: exit 2, nothing imported)."""
    _said(driver.cache_import(_project(), file), json_)


def _said(report: CacheReport, json_: bool) -> CacheReport:
    Output(json_).report(report, lambda: format_text(report))
    return report


@cache_app.command()
def warm(
    name: str = ProfileArg,
    emulate: bool = typer.Option(False, "--emulate", help="With the emulated vLLM."),
    timeout: float | None = typer.Option(None, "--timeout", help="Seconds to wait for ready."),
    json_: bool = JsonOpt,
) -> None:
    """Start the stack, wait until ready, take it down: its cache volume is filled for the next
    start (a campaign's arms) while nothing serves."""
    show = Output(json_)
    with deferred():
        driver.preload()
    project, r = _load(name)
    opts = driver.UpOptions(emulate, timeout)
    with ConsoleSink(timeout or r.profile.service.startup_timeout, quiet=show.json) as sink:
        result = driver.cache_warm(project, r, opts, sink)
    said = f"{name}: down again; its cache volume keeps what the start compiled\n"
    show.report(result, lambda: summary_text(result, terminal_width()) + said)


def format_text(report: CacheReport) -> str:
    lines = []
    for v in report.volumes:
        size = format_bytes(v.bytes) if v.bytes is not None else "size unknown"
        state = f"{size}, created {v.created}" if v.present else "absent (the next start is cold)"
        lines.append(f"{v.volume}  {state}{'  EMULATED' * v.emulated}")
        lines.append(f"  last use {v.last_use or '-'}; used by {', '.join(v.used_by) or '-'}")
        lines += [f"  filled on {'; '.join(v.gpus)}"] * bool(v.gpus)
        lines.append(f"  rendered by {', '.join(v.rendered_by) or '- (no profile here)'}")
        lines += [f"  mounted by {', '.join(v.mounted_by)}"] * bool(v.mounted_by)
        lines += [f"  MISMATCH  {p}" for p in v.problems]
        lines += [f"  NOT CHECKED  {p}" for p in v.unchecked]
        if v.pruned is not None:
            lines.append("  removed" if v.pruned else "  would be removed (--yes)")
    if report.file:
        lines.append(f"{report.action}: {report.file}, {report.files} files")
        lines += [f"  skipped {s} (not a plain file)" for s in report.skipped]
    return "\n".join(lines or [f"no cache volumes ({report.action})"]) + "\n"
