"""`composegen docs TOPIC` prints the pages the help points at, so an installed tool (no checkout, no
docs/ directory) can follow every pointer: no `--help` names a docs/*.md file, and every `composegen
docs X` it names is a page that exists."""

from __future__ import annotations

import re

import pytest
import typer.main

from composegen.cli.app import app
from composegen.cli.main import load_commands
from tests.support.cli import run_cli
from tests.support.helpers import REPO

load_commands()
GROUP = typer.main.get_command(app)


def _every_help() -> dict[str, str]:
    """`composegen A [B] --help` text, for every command and every group's subcommand."""
    argvs = [[name] for name in GROUP.commands]  # type: ignore[attr-defined]
    for name, command in GROUP.commands.items():  # type: ignore[attr-defined]
        argvs += [[name, sub] for sub in getattr(command, "commands", {})]
    return {" ".join(a): " ".join(run_cli(*a, "--help").stdout.split()) for a in argvs}


def test_no_help_points_at_a_file_the_wheel_lacks_and_every_topic_exists():
    pages = {p.stem for p in (REPO / "docs").glob("*.md")}
    named = set()
    for argv, text in _every_help().items():
        assert not re.search(r"docs/[\w-]+\.md", text), (argv, text)
        named |= set(re.findall(r"composegen docs ([\w-]+)", text))
    assert named and named <= pages, named - pages
    assert {"edge", "kubernetes", "standby", "shm", "json"} <= named


def test_a_topic_prints_its_page_and_the_list_names_them_all():
    res = run_cli("docs", "install")
    assert res.returncode == 0, res.stderr
    assert res.stdout == (REPO / "docs/install.md").read_text()
    listed = run_cli("docs")
    assert listed.returncode == 0
    names = {line.split()[0] for line in listed.stdout.splitlines() if line.startswith("  ")}
    assert names == {p.stem for p in (REPO / "docs").glob("*.md")} - {"README"}
    assert "Installing composegen" in listed.stdout


@pytest.mark.parametrize("topic", ["nope", "../README", "/etc/passwd"])
def test_an_unknown_topic_is_bad_input_naming_the_pages(topic):
    res = run_cli("docs", topic)
    assert res.returncode == 2 and res.stdout == "", res.stdout
    assert f"no page {topic!r}" in res.stderr and "install" in res.stderr, res.stderr
