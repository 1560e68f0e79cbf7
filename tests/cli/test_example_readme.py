"""examples/team-edge/README.md as written (issue 51 #2): every composegen command in it is one the CLI
parses, and names only the example's profiles and alias; the project it describes renders fresh and
validates, its standby pair included."""

from __future__ import annotations

import re
import shlex

import yaml

from tests.cli.test_help_examples import _parses
from tests.support.cli import run_cli
from tests.support.helpers import REPO

EXAMPLE = REPO / "examples/team-edge"
TEXT = (EXAMPLE / "README.md").read_text()


def commands() -> list[list[str]]:
    found = []
    for block in re.findall(r"```sh\n(.*?)```", TEXT, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            for part in re.split(r"&&|>", line.split("  #")[0]):
                argv = shlex.split(part)
                found += [argv] if argv[:1] == ["composegen"] else []
    return found


def test_every_command_parses_and_names_what_the_example_has():
    edge = yaml.safe_load((EXAMPLE / "edge.yaml").read_text())
    profiles = {p.stem for p in (EXAMPLE / "profiles").glob("*.yaml")}
    known = profiles | set(edge["aliases"]) | {"alice"}
    said = commands()
    assert len(said) >= 16, said
    for argv in said:
        _parses(argv)
        names = [w for w in argv[2:] if not w.startswith("-") and re.search(r"\d|-", w)]
        assert set(names) <= known | {"restore", "promote"}, argv
    # the walk the issue asks for, in its order: render, edge up, up, a key, curl, qualify, promote, rollback
    walk = re.findall(r"```sh\n(.*?)```", TEXT, re.S)[0]
    order = [
        "render",
        "edge up",
        "up 4096",
        "edge keys add",
        "curl",
        "qualify",
        "promote",
        "rollback",
    ]
    at = [walk.index(w if w == "curl" else f"composegen {w}") for w in order]
    assert at == sorted(at), order


def test_the_standby_pair_ships_behind_the_edge_and_validates():
    edge = yaml.safe_load((EXAMPLE / "edge.yaml").read_text())
    assert {"sb-8192", "sb-4096"} <= set(edge["stacks"])
    for name in ("sb-8192", "sb-4096"):
        assert "standby: {level: 1}" in (EXAMPLE / "profiles" / f"{name}.yaml").read_text()
    res = run_cli("--root", str(EXAMPLE), "validate")
    assert res.returncode == 0 and "ok  sb-4096" in res.stdout, res.stdout + res.stderr
    fresh = run_cli("--root", str(EXAMPLE), "render", "--check")
    assert fresh.returncode == 0, fresh.stdout + fresh.stderr
