"""The README's console examples are what the real commands print (run here, compared line by line)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

from tests.support.helpers import REPO

BLOCK = re.compile(r"```console\n(.*?)```", re.S)


def examples() -> list[tuple[str, list[str]]]:
    found: list[tuple[str, list[str]]] = []
    for block in BLOCK.findall((REPO / "README.md").read_text()):
        for chunk in re.split(r"(?m)^\$ ", block)[1:]:
            command, *output = chunk.rstrip("\n").split("\n")
            found.append((command, output))
    return found


def test_the_readme_has_console_examples():
    assert examples()


def test_every_console_example_is_what_the_command_prints():
    for command, expected in examples():
        argv = shlex.split(command.split("  #")[0])
        assert argv[0] == "composegen", command
        res = subprocess.run(
            [sys.executable, "-m", "composegen", *argv[1:]],
            cwd=REPO,
            capture_output=True,
            text=True,
        )
        assert res.stdout.rstrip("\n").split("\n") == expected, (command, res.stdout, res.stderr)
