"""Code the package writes twice (issue 52): pairs of places that share six or more lines of the
same shape. Counted by the `duplicates` tool where the machine has it (the figure the issue names),
else by `same_shape_pairs` below, a plainer count of the same idea with its own budget. Lower a budget
when a pair is mended; never raise it quietly."""

from __future__ import annotations

import io
import keyword
import re
import shutil
import subprocess
import tokenize
from collections import defaultdict
from itertools import combinations
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "composegen"
TOOL_PAIRS_BUDGET = 20  # pairs the tool does not mark as boilerplate (issue 52)
TOOL_ALL_PAIRS_BUDGET = 26  # boilerplate too: a ratchet toward the same 20
OWN_PAIRS_BUDGET = 66
RUN = 6
TOO_COMMON = 8  # a run found in more places than this is an idiom, as the tool leaves it out


def _shapes(path: Path) -> list[str]:
    """Each code line with its names, strings and numbers replaced by a placeholder; imports out."""
    noise = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}
    lines: dict[int, list[str]] = defaultdict(list)
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if tok.type in noise or tok.type == tokenize.ENDMARKER:
            continue
        name = tok.type == tokenize.NAME and not keyword.iskeyword(tok.string)
        token = {tokenize.STRING: "S", tokenize.NUMBER: "0"}.get(
            tok.type, "N" if name else tok.string
        )
        lines[tok.start[0]].append(token)
    shapes = [" ".join(tokens) for _, tokens in sorted(lines.items())]
    return [shape for shape in shapes if not shape.startswith(("import ", "from "))]


def _does_something(shape: str) -> bool:
    """A call, a branch or an assignment, not a row of a data table."""
    words = shape.split()
    return "(" in words or "=" in words or any(keyword.iskeyword(word) for word in words)


def same_shape_pairs(root: Path = PACKAGE) -> set[tuple[str, str]]:
    """Pairs of files (or a file with itself) that share a run of RUN same-shape code lines."""
    places: dict[tuple[str, ...], list[tuple[str, int]]] = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        shapes = _shapes(path)
        for start in range(len(shapes) - RUN + 1):
            window = tuple(shapes[start : start + RUN])
            if len(set(window)) > 2 and sum(map(_does_something, window)) >= RUN // 2:
                places[window].append((str(path.relative_to(root)), start))
    pairs = set()
    for found in places.values():
        if len(found) <= TOO_COMMON:
            for (file_a, at_a), (file_b, at_b) in combinations(found, 2):
                if file_a != file_b or abs(at_a - at_b) >= RUN:
                    pairs.add((file_a, file_b))
    return pairs


def _tool_pairs(tool: str) -> tuple[int, int]:
    """(all pairs, boilerplate pairs) as the `duplicates` tool counts them in the package."""
    out = subprocess.run(
        [tool, "--repo", str(PACKAGE), "--most", "1", "--seconds", "120"],
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    ).stdout
    assert "incomplete" not in out, out
    counts = re.search(r"^(\d+) pairs of places", out, re.M)
    boilerplate = re.search(r"(\d+) of those marked boilerplate", out)
    return int(counts[1]) if counts else 0, int(boilerplate[1]) if boilerplate else 0


def test_the_package_does_not_write_things_twice():
    if tool := shutil.which("duplicates"):
        pairs, boilerplate = _tool_pairs(tool)
        assert pairs - boilerplate <= TOOL_PAIRS_BUDGET
        assert pairs <= TOOL_ALL_PAIRS_BUDGET
    own = same_shape_pairs()
    assert len(own) <= OWN_PAIRS_BUDGET, sorted(own)


def test_the_own_count_finds_a_pair(tmp_path):
    """The fallback count is not blind: two files sharing a function's body make one pair."""
    lines = ["def f(a):", "    b = g(a)", "    if b:", "        return h(b, 1)", "    for c in b:"]
    body = "\n".join([*lines, "        k(c)", "    return None", ""])
    (tmp_path / "one.py").write_text(body)
    (tmp_path / "two.py").write_text(body.replace("g(", "other("))
    assert same_shape_pairs(tmp_path) == {("one.py", "two.py")}
