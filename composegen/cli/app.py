"""The typer app, its global options, and what the command modules share."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from composegen.cli import helptext
from composegen.cli.fastpath import version_line
from composegen.errors import BadInput
from composegen.output import out
from composegen.project import Project, find_project
from composegen.units import parse_human_int

if TYPE_CHECKING:  # annotations only: profiles load lazily (start-up time)
    from composegen.profiles.resolved import Resolved

helptext.install()  # usage lines and value kinds in words people read; --json names its report

app = typer.Typer(
    add_completion=True,
    # plain help: no `<bool>` placeholders, fits 80 columns, reads the same when piped
    rich_markup_mode=None,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Profile YAMLs in, pinned Docker Compose stacks for vLLM out; and a driver for them.",
)
_state: dict = {"root": None}

JsonOpt = typer.Option(
    False, "--json", help="Machine-readable output (its shape: composegen schema --report NAME)."
)


def project() -> Project:
    return find_project(_state["root"])


def _version(value: bool) -> None:
    if value:
        out(version_line())
        raise typer.Exit()


@app.callback()
def _main(
    root: Path | None = typer.Option(
        None, "--root", envvar="COMPOSEGEN_ROOT", help="Project root (holds profiles/)."
    ),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version."
    ),
) -> None:
    _state["root"] = root


def load_profile(name: str) -> tuple[Project, Resolved]:
    # why: ~0.5 s to import (measured); only commands that load a profile pay
    from composegen.profiles import resolve

    proj = project()
    return proj, resolve.load(proj, name)


def parse_ints(text: str, option: str = "--targets") -> list[int]:
    """Comma-separated token counts, with the sizes profiles accept: `117500,118_500,8k,128K`."""
    values = [parse_human_int(part.replace("_", "")) for part in text.split(",") if part.strip()]
    if not values or any(v is None or v <= 0 for v in values):
        msg = f"{option}: expected comma-separated positive token counts (e.g. 117500,8k,128K), got {text!r}"
        raise BadInput(msg)
    return [v for v in values if v is not None]


# Shell completion (`composegen --install-completion`): values read from the project, never guessed.
def _completing(ctx: typer.Context) -> Project:
    """The project being completed in: `--root` as typed on the line counts (the callback has not
    run)."""
    return find_project(ctx.find_root().params.get("root"))


def complete_profile(ctx: typer.Context, incomplete: str) -> list[str]:
    try:
        return [n for n in _completing(ctx).profile_names() if n.startswith(incomplete)]
    except Exception:  # completion must never print a traceback into the user's shell
        return []


def complete_run(ctx: typer.Context, incomplete: str) -> list[str]:
    """Run directories under runs/ (newest first) and profile names (compare takes either)."""
    try:
        proj = _completing(ctx)
        runs = sorted(
            (p for p in proj.runs_dir.glob("*") if (p / "evidence.json").is_file()), reverse=True
        )
        names = [proj.rel(p) for p in runs] + proj.profile_names()
    except Exception:  # completion must never print a traceback into the user's shell
        return []
    return [n for n in names if n.startswith(incomplete)]


def complete_gate_list(incomplete: str) -> list[str]:
    """`--only smoke,json,…`: complete the last item of a comma-separated list of gate names."""
    # why: ~0.5 s to import (measured); only completing --only needs it
    from composegen.evidence.gates import GATES

    done, _, last = incomplete.rpartition(",")
    prefix = f"{done}," if done else ""
    chosen = set(done.split(",")) if done else set()
    return [prefix + g for g in GATES if g.startswith(last) and g not in chosen]


# Shared arguments: the same help text and completion wherever a command takes a profile or a run.
ProfileArg = typer.Argument(
    ..., help="A profile's name (profiles/NAME.yaml).", autocompletion=complete_profile
)
StackArg = typer.Argument(
    ..., help="The profile of a running stack.", autocompletion=complete_profile
)
RunArg = typer.Argument(
    ...,
    help="A run: runs/<run>, a bundle path, or a profile name (its latest run).",
    autocompletion=complete_run,
)
