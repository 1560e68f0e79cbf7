"""`diff`: two stacks compared semantically (or a profile's compose and k8s renderings). No docker
import."""

from __future__ import annotations

import typer

from composegen.cli.app import JsonOpt, app
from composegen.cli.app import project as _project
from composegen.cli.optiongroups import flag, option, profile_arg
from composegen.diff import semantic as diffing
from composegen.diff import targets as cross
from composegen.errors import BadInput
from composegen.output import Output


@app.command()
def diff(
    a: str = profile_arg(
        "Profile name, compose file, or REF:path (e.g. HEAD~1:out/r33/compose.yaml).", ...
    ),
    b: str | None = profile_arg(
        "The other side, in any of the same forms as the first (or out/NAME/k8s/ with --targets)."
    ),
    functional_only: bool = flag("--functional-only", "Exit status from functional changes alone."),
    unified: bool = typer.Option(False, "--unified", help="Plain unified diff of the two files."),
    targets: str | None = option(
        None,
        "--targets",
        "compose,k8s: the same profile's two renderings, functionally (composegen docs kubernetes).",
    ),
    json_: bool = JsonOpt,
) -> None:
    """Semantic diff of two stacks: every change classed functional or identity.

    Example: composegen diff 4096-131k 8192-131k --functional-only  # in composegen's clone
    """
    project = _project()
    if targets is not None:
        if targets.replace(" ", "") not in ("compose,k8s", "k8s,compose"):
            raise BadInput(f"--targets: {targets!r}: only compose,k8s can be compared")
        report = cross.load(project.root, a, b)
        Output(json_).report(report, lambda: cross.format_text(report))
        raise typer.Exit(0 if report.equal else 1)
    if b is None:
        raise BadInput("diff: give two inputs (or NAME --targets compose,k8s)")
    side_a, side_b = diffing.load_side(a, project.root), diffing.load_side(b, project.root)
    identity = diffing.identity_paths_for(project, [a, b])
    changes = diffing.compare(side_a.data, side_b.data, identity_paths=identity)
    Output(json_).report(
        [change.report().to_json() for change in changes],
        lambda: diffing.unified(side_a.text, side_b.text, side_a.label, side_b.label)
        if unified
        else diffing.format_text(changes, side_a.label, side_b.label),
    )
    raise typer.Exit(diffing.exit_status(changes, functional_only))
