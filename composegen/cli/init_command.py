"""`composegen init`: a new project with one commented starter profile and the schema editors read."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import typer

from composegen.cli.app import app
from composegen.errors import BadInput
from composegen.output import out


@app.command()
def init(
    directory: Path = typer.Argument(Path("."), help="Where to create profiles/ (default: here)."),
    name: str = typer.Option("starter", "--name", help="The starter profile's name."),
) -> None:
    """Scaffold a project: profiles/NAME.yaml (every field commented) and profiles/schema.json.

    Example: composegen init ~/stacks --name qwen3-small
    """
    import json

    from composegen import safewrite
    from composegen.profiles.schema import json_schema

    profiles = directory / "profiles"
    if profiles.is_dir() and any(profiles.glob("*.yaml")):
        raise BadInput(f"{profiles}: already holds profiles; init only scaffolds an empty project")
    if not name or not name[0].isalnum() or not all(c.isalnum() or c in "-_" for c in name) or name != name.lower():
        raise BadInput(f"--name: {name!r}: use lower-case letters, digits, '-' and '_' (it names the compose project)")
    starter = resources.files("composegen.cli").joinpath("data/starter-profile.yaml").read_text(encoding="utf-8")
    schema = json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"
    try:
        directory.mkdir(parents=True, exist_ok=True)  # the user's own path; below it, no link is followed
    except OSError as exc:
        raise BadInput(f"{directory}: cannot be the project directory ({exc.strerror})") from None
    safewrite.write_all([(profiles / f"{name}.yaml", starter), (profiles / "schema.json", schema)], base=directory)
    out(f"created {profiles / (name + '.yaml')} and {profiles / 'schema.json'}")
    out(f"next: edit it, then `composegen --root {directory} validate {name}` and `render {name}`")
