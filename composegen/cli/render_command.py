"""`render`: profiles into out/ (compose, and k8s where asked), or with --check the drift. No docker
import. The command parses its arguments; render_output.py renders, checks and prints."""

from __future__ import annotations

from composegen.cli.app import JsonOpt, app
from composegen.cli.app import project as _project
from composegen.cli.optiongroups import flag, option, profile_arg
from composegen.cli.render_output import render as render_and_print


@app.command()
def render(
    names: list[str] | None = profile_arg("Profiles to render (all by default)."),
    check: bool = flag("--check", "Write nothing; exit 1 with a diff when out/ is stale."),
    target: str | None = option(
        None,
        "--target",
        "compose, k8s (out/NAME/k8s/: composegen docs kubernetes) or all; default: compose, plus k8s where "
        "out/NAME/k8s/ exists.",
    ),
    json_: bool = JsonOpt,
) -> None:
    """Render out/<name>/compose.yaml from profiles/<name>.yaml (all: also remove generated files of
    profiles that no longer exist).

    Example: composegen render --check
    """
    render_and_print(_project(), names, check=check, target=target, json_=json_)
