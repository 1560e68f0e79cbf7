"""`composegen init`: a new project with one commented starter profile and the schema editors
read."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import typer

from composegen import ledger, safewrite
from composegen import render as rendering
from composegen.cli.app import app
from composegen.errors import BadInput
from composegen.output import out
from composegen.profiles.schema import json_schema
from composegen.project import Project, profile_name_problem


@app.command()
def init(
    directory: Path = typer.Argument(Path("."), help="Where to create profiles/ (default: here)."),
    name: str = typer.Option("starter", "--name", help="The starter profile's name."),
) -> None:
    """Scaffold a project: profiles/NAME.yaml (every field commented), profiles/schema.json and its
    rendered out/NAME/compose.yaml, so `composegen up NAME --emulate` runs it at once.

    Example: composegen init ~/stacks --name qwen3-small
    """
    if problem := profile_name_problem(name):  # the grammar every other command uses
        raise BadInput(f"--name: {problem}")
    profiles = directory / "profiles"
    for place in (directory, profiles):
        if place.exists() and not place.is_dir():
            raise BadInput(f"{place}: not a directory; init creates DIRECTORY/profiles/")
    if profiles.is_dir() and any(profiles.glob("*.yaml")):
        raise BadInput(f"{profiles}: already holds profiles; init only scaffolds an empty project")
    starter = (
        resources.files("composegen.cli")
        .joinpath("data/starter-profile.yaml")
        .read_text(encoding="utf-8")
    )
    schema = json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"
    try:
        # the user's own path; below it, no link is followed
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInput(f"{directory}: cannot be the project directory ({exc.strerror})") from None
    safewrite.write_all(
        [(profiles / f"{name}.yaml", starter), (profiles / "schema.json", schema)], base=directory
    )
    project = Project(directory.resolve())
    ledger.write(project, rendering.render_all(project, [name]))
    compose = directory / "out" / name / "compose.yaml"
    out(f"created {profiles / (name + '.yaml')}, {profiles / 'schema.json'} and {compose}")
    # the README's quick start, from here on
    where = "" if directory.resolve() == Path.cwd().resolve() else f"cd {directory} && "
    out(f"next: {where}composegen doctor && composegen up {name} --emulate")
    out(f"then: edit profiles/{name}.yaml for your model and GPUs (composegen docs profiles)")
