"""docs/commands.md keeps agreeing with the CLI: every registered command has a row, every option is in it,
and the exit-code table lists the codes errors.py defines."""

from __future__ import annotations

import re

import pytest
import typer.main

from composegen import errors
from composegen.cli.app import app
from composegen.cli.main import load_commands
from tests.support.helpers import REPO

DOC = (REPO / "docs/commands.md").read_text()
load_commands()  # every command module registers its commands
GROUP = typer.main.get_command(app)
ROWS = [line for line in DOC.splitlines() if line.startswith("| `")]
NOT_LISTED = {"--json", "--help"}  # --json: said once for every command above the table


def row_of(name: str) -> str:
    found = [row for row in ROWS if re.match(rf"\| `{re.escape(name)}[ `]", row)]
    assert len(found) == 1, f"docs/commands.md: expected one row for `{name}`, found {len(found)}"
    return found[0]


@pytest.mark.parametrize("name", sorted(GROUP.commands))  # type: ignore[attr-defined]
def test_every_command_and_option_is_documented(name):
    row = row_of(name)
    command = GROUP.commands[name]  # type: ignore[attr-defined]
    options = [
        p.opts for p in command.params if p.opts[0].startswith("-") and not NOT_LISTED & set(p.opts)
    ]
    missing = sorted(
        opts[-1] for opts in options if not any(re.search(rf"{re.escape(o)}\b", row) for o in opts)
    )
    assert not missing, f"docs/commands.md row for `{name}` lacks {missing}"


def test_the_exit_code_table_lists_every_code():
    table = DOC.split("### Exit codes", 1)[1]
    for code in (
        errors.OK,
        errors.CHECK_FAILED,
        errors.BAD_INPUT,
        errors.RUNTIME,
        errors.INTERRUPTED,
    ):
        assert re.search(rf"^\| {code} \|", table, re.M), code
    assert "stale out/" in table.split("\n| 1 |", 1)[1].split("\n")[0]
    assert "`status NAME`" in table.split("\n| 3 |", 1)[1].split("\n")[0]
