"""The README's console examples are what the real commands print (run here, compared line by line): a
block that starts with `composegen init` runs in a fresh directory, as a newcomer would, its `cat > FILE
<<'EOF'` writing the file as shown; the others run in the clone. The README stays a two-minute read,
and every relative link of the README, docs/ and examples/ leads somewhere."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from tests.support.cli import run_cli
from tests.support.helpers import REPO

BLOCK = re.compile(r"```console\n(.*?)```", re.S)
README = (REPO / "README.md").read_text()


def examples(text: str = README) -> list[tuple[bool, list[tuple[str, list[str]]]]]:
    """Each console block: (runs in a fresh directory, [(command, the lines it prints)])."""
    found = []
    for block in BLOCK.findall(text):
        chunks = []
        for chunk in re.split(r"(?m)^\$ ", block)[1:]:
            command, *output = chunk.rstrip("\n").split("\n")
            chunks.append((command, output))
        found.append((chunks[0][0] == "composegen init", chunks))
    return found


def test_the_readme_has_console_examples():
    assert examples() and any(fresh for fresh, _ in examples())


def _run(command: str, expected: list[str], cwd: Path) -> None:
    if heredoc := re.fullmatch(r"cat > (\S+) <<'EOF'", command):
        assert expected[-1] == "EOF", command
        (cwd / heredoc[1]).write_text("\n".join(expected[:-1]) + "\n")
        return
    argv = shlex.split(command.split("  #")[0])
    assert argv[0] == "composegen", command
    res = run_cli(*argv[1:], cwd=cwd)
    assert res.stdout.rstrip("\n").split("\n") == expected, (command, res.stdout, res.stderr)


def test_every_console_example_is_what_the_command_prints(tmp_path):
    for fresh, chunks in examples():
        for command, expected in chunks:
            _run(command, expected, tmp_path if fresh else REPO)


def test_a_newcomer_reads_it_in_two_minutes_and_installs_with_debian_packages():
    assert len(README.encode()) <= 8 << 10
    assert "examples/team-edge" in README and "composegen render starter-4k" in README
    tool = README.split("## As an installed tool", 1)[1].split("```sh\n", 1)[1].split("```")[0]
    assert tool.startswith("apt-get install pipx python3-build"), tool
    assert not re.search(r"^uv ", tool, re.M) and "pip install" not in tool, tool
    clone = README.split("## As an installed tool", 1)[0]
    assert "on your PATH" in clone  # the .venv's composegen: the clone route's own step


def _anchors(page: Path) -> set[str]:
    titles = re.findall(r"^#+ (.*)$", page.read_text(), re.M)
    return {re.sub(r"[^\w\- ]", "", t.strip().lower()).replace(" ", "-") for t in titles}


def test_every_relative_link_leads_to_a_file_and_its_heading():
    pages = [REPO / "README.md", *(REPO / "docs").rglob("*.md"), *(REPO / "examples").rglob("*.md")]
    broken = []
    for page in pages:
        for link in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if re.match(r"[a-z]+:", link):
                continue
            path, _, anchor = link.partition("#")
            target = (page.parent / path).resolve() if path else page
            if not target.exists() or (anchor and anchor not in _anchors(target)):
                broken.append(f"{page.relative_to(REPO)}: {link}")
    assert not broken, broken
