"""The CLI's house figures (issue 41, item 3), measured from the code and the live command tree: one
output decision (composegen.output.Output) instead of a `--json` branch per command, command modules
of at most 250 lines, `shm` and `shm reclaim` of at most 7 options each, fewer top-level entries
(the edge's keys under `edge`), and the old spellings still working, hidden, with a note."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import typer.main

from composegen.cli.aliases import rewrite
from composegen.cli.app import app
from composegen.cli.main import load_commands
from composegen.output import Output
from tests.support.cli import run_cli
from tests.support.helpers import REPO

CLI = REPO / "composegen" / "cli"
JSON_FLAGS = {"json_", "as_json"}
JSON_BRANCH_BUDGET = 5  # 38 before Output (measured at c4064c9)
COMMAND_MODULE_LINES = 250  # stack_commands.py was 400
OPTIONS_PER_COMMAND = 7  # `shm` had 11
# 31 at c4064c9; `docs` (issue 40) landed since: 32 without the grouping
TOP_LEVEL_WITHOUT_GROUPING = 34  # `wake` (issue 49), `cache` (issue 47: one group for six)

load_commands()
GROUP = typer.main.get_command(app)


def _decides_on_json(test: ast.expr) -> bool:
    """A condition reading --json: `json_`, `as_json`, or an Output's `.json`."""
    return any(
        (isinstance(n, ast.Name) and n.id in JSON_FLAGS)
        or (isinstance(n, ast.Attribute) and n.attr == "json")
        for n in ast.walk(test)
    )


def json_branches() -> list[str]:
    found = []
    for path in sorted(CLI.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.If, ast.IfExp)) and _decides_on_json(node.test):
                found.append(f"{path.name}:{node.lineno}")
    return found


def test_the_branch_counter_sees_every_spelling_of_a_json_branch():
    code = "if json_: a\nb if not as_json else c\nif show.json and x: d\nOutput(json_).report(r)\n"
    tree = ast.parse(code)
    branches = [n for n in ast.walk(tree) if isinstance(n, (ast.If, ast.IfExp))]
    assert [_decides_on_json(n.test) for n in branches] == [True, True, True]


def test_commands_hand_their_report_to_one_output_object():
    found = json_branches()
    assert len(found) <= JSON_BRANCH_BUDGET, found


def _registers_commands(path: Path) -> bool:
    text = path.read_text()
    return ".command(" in text or ".callback(" in text


def test_every_command_module_is_small():
    sizes = {
        p.name: len(p.read_text().splitlines())
        for p in sorted(CLI.glob("*.py"))
        if _registers_commands(p)
    }
    assert len(sizes) >= 15  # the counter found the command modules
    assert {n: s for n, s in sizes.items() if s > COMMAND_MODULE_LINES} == {}


def _options(command) -> list[str]:
    return [p.name for p in command.params if p.name != "help"]


def test_shm_and_shm_reclaim_are_two_commands_of_few_options():
    shm = GROUP.commands["shm"]  # type: ignore[attr-defined]
    reclaim = shm.commands["reclaim"]
    assert len(_options(shm)) <= OPTIONS_PER_COMMAND, _options(shm)
    assert len(_options(reclaim)) <= OPTIONS_PER_COMMAND, _options(reclaim)
    assert "reclaim" not in _options(shm) and "yes" in _options(reclaim)


def test_the_edge_owns_its_keys_and_the_top_level_shrank():
    top = [name for name, c in GROUP.commands.items() if not c.hidden]  # type: ignore[attr-defined]
    assert "keys" not in top and len(top) < TOP_LEVEL_WITHOUT_GROUPING, top
    edge = GROUP.commands["edge"]  # type: ignore[attr-defined]
    assert sorted(edge.commands["keys"].commands) == ["add", "list", "revoke", "rotate"]


def test_old_spellings_are_rewritten_to_the_new_ones():
    assert rewrite(["--root", "x", "keys", "list", "--json"]) == [
        "--root", "x", "edge", "keys", "list", "--json",
    ]  # fmt: skip
    assert rewrite(["shm", "--reclaim", "--fail-on-leftover", "--yes", "--path", "/d"]) == [
        "shm", "--fail-on-leftover", "reclaim", "--yes", "--path", "/d",
    ]  # fmt: skip
    assert rewrite(["shm", "--json"]) == ["shm", "--json"]
    assert rewrite(["edge", "keys", "list"]) == ["edge", "keys", "list"]


def test_an_old_spelling_still_runs_and_says_once_what_replaced_it(tmp_path):
    (tmp_path / "psm_deadbeef").write_bytes(b"x")
    old = run_cli(
        "shm", "--reclaim", "--path", str(tmp_path), "--force", "--min-age", "0", "--json"
    )
    new = run_cli("shm", "reclaim", "--path", str(tmp_path), "--force", "--min-age", "0", "--json")
    assert old.returncode == new.returncode == 0, old.stderr
    assert json.loads(old.stdout)["candidates"] == json.loads(new.stdout)["candidates"] != []
    assert old.stderr.startswith("composegen: `shm --reclaim` is now `shm reclaim`;")
    assert new.stderr.count("\n") == old.stderr.count("\n") - 1
    keys = run_cli("--root", str(REPO / "examples/team-edge"), "keys", "--help")
    assert keys.returncode == 0 and "Usage: python -m composegen edge keys" in keys.stdout
    assert keys.stderr == (
        "composegen: `keys` is now `edge keys`; the old spelling goes in the next release\n"
    )


class _Report:
    def to_json(self) -> dict:
        return {"b": 1, "a": "x"}


def test_the_output_object_prints_json_or_text_never_both(capsys):
    def never() -> str:
        raise AssertionError("the JSON run formatted the text")

    machine = Output(json_=True)
    machine.report(_Report(), never)
    machine.say(never)
    machine.note("progress")
    assert capsys.readouterr() == ('{"a":"x","b":1}\n', "")
    person = Output(json_=False)
    person.report(_Report(), lambda: "a line")
    person.say("another")
    person.note("progress")
    assert capsys.readouterr() == ("a line\nanother\n", "progress\n")
