"""`composegen shm` (who holds what in /dev/shm) and `composegen shm reclaim` (a safe removal of
what nothing holds); docs/shm.md.

The plain scan is usually answered before typer loads (fastpath.py); both ways print through
shm_output.py. `--fail-on-leftover` is the group's option (`shm --fail-on-leftover reclaim --yes`):
it says what exit 1 means for either command. The old spelling `shm --reclaim …` is rewritten to
this one by aliases.py for one release.
"""

from __future__ import annotations

import typer

from composegen.cli import shm_output
from composegen.cli.app import JsonOpt
from composegen.cli.app import app as root_app
from composegen.cli.app import load_profile as _load
from composegen.cli.fastpath import ContainerLabels
from composegen.cli.optiongroups import flag, option, profile_option
from composegen.errors import BadInput
from composegen.output import Output
from composegen.shm import reclaim as reclaiming
from composegen.stack import driver

PathOpt = typer.Option(None, "--path", help="Directory to inspect (default /dev/shm).")
ForceOpt = typer.Option(False, "--force", help="Accept a --path that is not a tmpfs.")
FailOpt = flag("--fail-on-leftover", "Exit 1 when leftovers are present (CI, cron).")
shm_app = typer.Typer(invoke_without_command=True)
root_app.add_typer(shm_app, name="shm")


@shm_app.callback(invoke_without_command=True)
def shm(
    ctx: typer.Context,
    path: str | None = PathOpt,
    container: str | None = option(None, "--container", "A running container's private /dev/shm."),
    profile_name: str | None = profile_option(
        "Multi-node: /dev/shm of every node of this profile."
    ),
    force: bool = ForceOpt,
    fail_on_leftover: bool = FailOpt,
    json_: bool = JsonOpt,
) -> None:
    """Who holds what in /dev/shm, and a safe reclaim of what nothing uses (composegen docs shm).

    `shm reclaim` previews what it would remove; add --yes to remove it.

    Example: composegen shm && composegen shm reclaim
    """
    if ctx.invoked_subcommand is not None:
        return _before_subcommand(ctx, fail_on_leftover)
    places = (("--path", path), ("--container", container), ("--profile", profile_name))
    where = [flag for flag, given in places if given]
    if len(where) > 1:
        raise BadInput(f"{' and '.join(where)} name different places: give one")
    if force and (container or profile_name):
        raise BadInput("--force: only meaningful with --path (or the default /dev/shm)")
    show, labels = Output(json_), ContainerLabels()
    if profile_name:
        nodes, text = driver.shm_report(_load(profile_name)[1])
        return show.report(nodes, text)
    if container:
        report = driver.container_shm(container, labels)
        return shm_output.print_scan(report, show, fail_on_leftover)
    shm_output.print_path_scan(
        path or "/dev/shm", show, fail_on_leftover=fail_on_leftover, force=force, labels=labels
    )


def _before_subcommand(ctx: typer.Context, fail_on_leftover: bool) -> None:
    """Before `reclaim` only --fail-on-leftover belongs; the place and --json come after it."""
    given = [p.opts[0] for p in ctx.command.params if p.name and ctx.params.get(p.name)]
    if given != ["--fail-on-leftover"] * bool(fail_on_leftover):
        shown = ", ".join(g for g in given if g != "--fail-on-leftover")
        msg = f"{shown}: give {'them' if ',' in shown else 'it'} after `{ctx.invoked_subcommand}`"
        raise BadInput(msg)
    ctx.obj = fail_on_leftover


@shm_app.command("reclaim")
def shm_reclaim(
    ctx: typer.Context,
    path: str | None = PathOpt,
    yes: bool = typer.Option(False, "--yes", help="Really remove (without it: a preview)."),
    include_unknown: bool = flag("--include-unknown", "Also unknown names nothing holds."),
    ignore_unreadable: bool = flag(
        "--ignore-unreadable", "Reclaim even though some processes could not be checked."
    ),
    min_age: float = option(
        reclaiming.DEFAULT_MIN_AGE,
        "--min-age",
        "Leave files whose mtime or ctime is newer than this.",
        metavar="SECONDS",
    ),
    force: bool = ForceOpt,
    json_: bool = JsonOpt,
) -> None:
    """Preview (or with --yes, remove) the leftover files nothing holds; exit 1 with the group's
    --fail-on-leftover when some are still present (or, in a preview, about to be removed).

    Example: composegen shm reclaim --min-age 120
    """
    result = reclaiming.reclaim(
        path or "/dev/shm",
        yes=yes,
        include_unknown=include_unknown,
        ignore_unreadable=ignore_unreadable,
        min_age=min_age,
        force=force,
        container_labels=ContainerLabels(),
    )
    # `shm --fail-on-leftover reclaim`: the group's flag, as its callback left it
    shm_output.print_reclaim(result, Output(json_), fail_on_leftover=bool(ctx.obj))
