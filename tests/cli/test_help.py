"""Every command's `--help` shows an example and says what each argument and option is for.

The commands are read from the typer app itself, so a command added later is held to the same bar.
"""

from __future__ import annotations

import re

import pytest
import typer.main

from composegen.cli.app import app
from composegen.cli.main import load_commands
from tests.support.cli import run_cli

load_commands()  # every command module registers its commands
GROUP = typer.main.get_command(app)
COMMANDS = sorted(GROUP.commands)  # type: ignore[attr-defined]


def test_the_walk_sees_the_commands():
    assert {"up", "status", "logs", "diff", "compare", "ladder", "evidence", "init"} <= set(
        COMMANDS
    )


@pytest.mark.parametrize("name", COMMANDS)
def test_help_has_an_example_and_help_on_every_parameter(name):
    command = GROUP.commands[name]  # type: ignore[attr-defined]
    res = run_cli(name, "--help")
    assert res.returncode == 0, res.stderr
    text = res.stdout
    example = [line.strip() for line in text.splitlines() if line.strip().startswith("Example:")]
    assert example and f"composegen {name}" in example[0], text
    assert "<bool>" not in text
    # The first docstring line stays the summary the command list shows.
    assert command.get_short_help_str(limit=300).split(".")[0] in " ".join(text.split())
    silent = [p.name for p in command.params if not (getattr(p, "help", None) or "").strip()]
    assert not silent, f"{name}: no help text for {silent}"
    for p in command.params:  # ... and the help text is what --help prints
        assert " ".join(p.help.split())[:30] in " ".join(text.split()), (name, p.name)


def test_json_help_points_at_the_schema_command():
    text = run_cli("status", "--help").stdout
    assert "composegen schema --report status" in " ".join(text.split())
    assert "README" not in text


@pytest.mark.parametrize("name", COMMANDS)
def test_usage_and_values_read_as_words_and_json_names_its_own_report(name):
    from composegen.cli import reports

    text = " ".join(run_cli(name, "--help").stdout.split())
    # after `python -m composegen NAME`
    usage = text.split("Usage: ", 1)[1].split(" ", 3)[3].split("  ")[0]
    assert "{" not in usage and "<list[" not in text and " range>" not in text, text[:400]
    if "--json" in text:
        named = re.findall(r"its shape: composegen schema --report ([a-z-]+)", text)
        assert named and named[0] in reports.names(), (name, named)
        assert "--report NAME" not in text
