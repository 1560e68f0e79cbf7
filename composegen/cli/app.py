"""The typer app, its global options, and what the command modules share."""

from __future__ import annotations

from pathlib import Path

import typer

from composegen import __version__
from composegen.errors import BadInput
from composegen.output import out

app = typer.Typer(
    add_completion=True,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Profile YAMLs in, pinned Docker Compose stacks for vLLM out; and a driver for them.",
)
_state: dict = {"root": None}

JsonOpt = typer.Option(False, "--json", help="Machine-readable output (shape documented in the README).")


def project():
    from composegen.project import find_project

    return find_project(_state["root"])


def _version(value: bool):
    if value:
        out(f"composegen {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    root: Path | None = typer.Option(None, "--root", envvar="COMPOSEGEN_ROOT", help="Project root (holds profiles/)."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
):
    _state["root"] = root


def load_profile(name: str):
    from composegen.profiles import resolve as profile

    proj = project()
    return proj, profile.load(proj, name)


def parse_ints(text: str) -> list[int]:
    try:
        return [int(t.replace("_", "")) for t in text.split(",") if t.strip()]
    except ValueError:
        raise BadInput(f"--targets/--ladder: expected comma-separated integers, got {text!r}") from None
