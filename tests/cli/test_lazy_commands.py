"""cli/main.py loads only the command module a run names: its table must say exactly what each module
registers, in `--help` order, and a run must load that module alone."""

from __future__ import annotations

import ast
import json
import subprocess
import sys

import pytest

from composegen.cli.main import COMMANDS, MODULES, command_name
from tests.support.helpers import REPO

# In a fresh interpreter: import every module and note which one defines each command and group.
REGISTERED = """
import importlib, json
from composegen.cli.app import app
modules = {m: importlib.import_module("composegen.cli." + m) for m in MODULES}
found = {m: [] for m in MODULES}
for c in app.registered_commands:
    found[c.callback.__module__.rsplit(".", 1)[1]].append(c.name or c.callback.__name__.replace("_", "-"))
for g in app.registered_groups:  # a group belongs to the module whose Typer instance it is
    owner = [m for m, mod in modules.items() if g.typer_instance in vars(mod).values()]
    found[owner[0]].append(g.name)
print(json.dumps(found))
"""

LOADED = """
import sys
sys.argv = ["composegen", *ARGV]
from composegen.cli.main import main
try:
    main()
except SystemExit:
    pass
print("LOADED", sorted(m.rsplit(".", 1)[1] for m in sys.modules if m.endswith(("_commands", "_command"))),
      file=sys.stderr)
"""


def test_the_table_is_what_the_modules_register():
    code = f"MODULES = {MODULES!r}\n" + REGISTERED
    res = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    found = json.loads(res.stdout)
    assert all(found.values())  # every module registers something
    table: dict[str, list[str]] = {}
    for name, module in COMMANDS.items():
        table.setdefault(module, []).append(name)
    # The same names per module; commands before groups is typer's own listing order.
    assert {m: sorted(names) for m, names in found.items()} == {
        m: sorted(names) for m, names in table.items()
    }


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["up", "x", "--emulate"], "up"),
        (["--root", "dir", "render", "--check"], "render"),
        (["--root=dir", "edge", "up"], "edge"),
        (["--help"], None),
        (["--no-such", "up"], None),
        ([], None),
    ],
)
def test_command_name(argv, expected):
    assert command_name(argv) == expected


@pytest.mark.parametrize(
    ("argv", "loaded"),
    [
        (["validate"], ["profile_commands"]),
        (["up", "--help"], ["up_command"]),
        (["--root", ".", "doctor", "--help"], ["setup_commands"]),
        (["no-such-command"], sorted(MODULES)),
    ],
)
def test_a_run_loads_the_module_of_its_command(argv, loaded):
    code = f"ARGV = {argv!r}\n" + LOADED
    res = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert f"LOADED {loaded!r}" in res.stderr, res.stderr[-800:]


def test_help_order_does_not_depend_on_what_loaded_first():
    def listed(loads: str) -> str:
        code = (
            "from composegen.cli.main import load_commands\nfrom composegen.cli.app import app\n"
            f"import typer.main\n{loads}\nprint(list(typer.main.get_command(app).commands))"
        )
        return subprocess.run(
            [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout

    fresh = listed("load_commands()")
    assert sorted(ast.literal_eval(fresh)) == sorted(COMMANDS)
    assert listed("load_commands(['up'])\nload_commands(['edge', 'up'])\nload_commands()") == fresh
