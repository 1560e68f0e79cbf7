"""`composegen --help` lists the commands in the groups people meet them in (issue 51 #5): start here
first (`init`, `doctor`), then describe and render, run a stack, prove, serve a team, maintain the host;
each group short, every command in exactly one, and the screen 80 columns wide when piped."""

from __future__ import annotations

import re

import typer.main

from composegen.cli.app import app
from composegen.cli.main import load_commands
from tests.support.cli import run_cli

load_commands()
GROUP = typer.main.get_command(app)
PANELS = [
    "Start here",
    "Describe and render",
    "Run a stack",
    "Prove",
    "Serve a team",
    "Maintain the host",
]


def _sections(text: str) -> dict[str, list[str]]:
    """Each `Title:` of a plain help screen -> the first word of its indented rows."""
    found: dict[str, list[str]] = {}
    for title, rows in re.findall(r"^(\S[^\n]*):\n((?:  [^\n]*\n?)+)", text, re.M):
        found[title] = re.findall(r"^  (\S+)", rows, re.M)
    return found


def test_the_commands_come_in_the_groups_people_meet_them_in():
    res = run_cli("--help", env={"COLUMNS": "80"})
    assert res.returncode == 0, res.stderr
    sections = _sections(res.stdout)
    assert [t for t in sections if t not in ("Options", "Usage")] == PANELS, res.stdout
    assert sections["Start here"][:2] == ["init", "doctor"], sections["Start here"]
    listed = [name for title in PANELS for name in sections[title]]
    assert sorted(listed) == sorted(GROUP.commands), listed  # type: ignore[attr-defined]
    assert all(len(sections[title]) <= 9 for title in PANELS), sections
    assert "promote" in sections["Serve a team"] and "up" in sections["Run a stack"]
    assert max(len(line) for line in res.stdout.splitlines()) <= 80, res.stdout


def test_a_bare_composegen_shows_the_same_groups():
    res = run_cli()
    assert res.returncode == 0 and "Start here:" in res.stdout + res.stderr, res.stderr


def test_promote_help_describes_the_standby_path_too():
    text = " ".join(run_cli("promote", "--help").stdout.split())
    assert "standby:" in text and "sleep" in text and "composegen docs standby" in text, text
