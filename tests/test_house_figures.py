"""The house's figures (issue 41), measured where they can regress: the package's line lengths
and how heavy its functions are (length, McCabe complexity as radon and ruff count it).

`ruff format` wraps code at 100 columns; what it cannot wrap (a long string, a URL) may run to 120
(ruff's E501). This keeps those lines a small share, as the anchors' code keeps them (<= 3.5%).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "composegen"
LONG_LINE_SHARE_BUDGET = 0.03


def package_lines() -> list[str]:
    return [
        line for path in sorted(PACKAGE.rglob("*.py")) for line in path.read_text().splitlines()
    ]


def test_few_lines_run_past_100_columns():
    lines = package_lines()
    long_lines = sum(len(line) > 100 for line in lines)
    share = long_lines / len(lines)
    assert share <= LONG_LINE_SHARE_BUDGET, f"{long_lines} of {len(lines)} lines over 100 columns"


# ---- lighter functions (issue 41 item 4) -------------------------------------------------------
# Budgets: lower them when a function gets lighter, never raise them quietly.
LONG_FUNCTION_LINES = 100
LONG_FUNCTIONS_BUDGET = 0
DENSE_COMPLEXITY = 21  # radon's grade D and worse
DENSE_FUNCTIONS_BUDGET = 15
RUFF_C901_AT = 10
RUFF_C901_BUDGET = 15
RUFF_MAX_COMPLEXITY = 12


def _functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def package_functions() -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    return [
        (f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name}", node)
        for path in sorted(PACKAGE.rglob("*.py"))
        for node in _functions(ast.parse(path.read_text()))
    ]


def _own_nodes(function: ast.AST) -> list[ast.AST]:
    """The function's nodes, without those of the functions and classes it defines (radon
    scores those on their own)."""
    nodes, todo = [], list(ast.iter_child_nodes(function))
    while todo:
        node = todo.pop()
        nodes.append(node)
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            todo.extend(ast.iter_child_nodes(node))
    return nodes


def cyclomatic(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """McCabe complexity counted as radon counts it: 1, plus each branch (if, conditional
    expression, assert, loop and its else, except and try-else, match case), each extra operand of
    and/or, each comprehension and its filters; a nested function is scored on its own."""
    score = 1
    for node in _own_nodes(function):
        if isinstance(node, ast.If | ast.IfExp | ast.Assert):
            score += 1
        elif isinstance(node, ast.For | ast.AsyncFor | ast.While):
            score += 1 + bool(node.orelse)
        elif isinstance(node, ast.Try | ast.TryStar):
            score += len(node.handlers) + bool(node.orelse)
        elif isinstance(node, ast.BoolOp):
            score += len(node.values) - 1
        elif isinstance(node, ast.comprehension):
            score += 1 + len(node.ifs)
        elif isinstance(node, ast.Match):
            score += len(node.cases)
    return score


def test_the_complexity_counter_counts_as_radon_does():
    source = """
def f(xs, y):
    if y and xs or not y:
        pass
    elif y:
        pass
    for x in xs:
        pass
    else:
        pass
    try:
        pass
    except ValueError:
        pass
    except KeyError:
        pass
    with open(y):
        pass
    def inner():
        return [x for x in xs if x if y]
    return 1 if y else 2
"""
    # radon cc -s gives f - B (10): 1 + if 1 + and/or 2 + elif 1 + for and its else 2 + excepts 2
    # + conditional 1 (with adds nothing; inner is scored apart: 1 + comprehension and filters 3)
    scores = {f.name: cyclomatic(f) for f in _functions(ast.parse(source))}
    assert scores == {"f": 10, "inner": 4}


def test_no_function_runs_past_100_lines():
    long = [
        f"{where} ({node.end_lineno - node.lineno + 1} lines)"
        for where, node in package_functions()
        if (node.end_lineno or node.lineno) - node.lineno + 1 > LONG_FUNCTION_LINES
    ]
    assert len(long) <= LONG_FUNCTIONS_BUDGET, "\n".join(long)


def test_few_functions_are_dense():
    dense = [
        f"{where} ({score})"
        for where, node in package_functions()
        if (score := cyclomatic(node)) >= DENSE_COMPLEXITY
    ]
    assert len(dense) <= DENSE_FUNCTIONS_BUDGET, "\n".join(dense)


def _ruff_c901(max_complexity: int) -> list[str]:
    ruff = Path(sys.executable).with_name("ruff")
    done = subprocess.run(
        [
            str(ruff if ruff.exists() else "ruff"),
            "check",
            "--select",
            "C901",
            "--config",
            f"lint.mccabe.max-complexity={max_complexity}",
            "--output-format",
            "concise",
            "--ignore-noqa",
            "--no-cache",
            str(PACKAGE),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    return [line for line in done.stdout.splitlines() if "C901" in line]


def test_few_functions_pass_ruffs_complexity_10():
    over = _ruff_c901(RUFF_C901_AT)
    assert over, "ruff found no function over 10: lower the budget (or ruff did not run)"
    assert len(over) <= RUFF_C901_BUDGET, "\n".join(over)


def test_ruffs_max_complexity_is_12_and_holds():
    config = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())
    assert config["tool"]["ruff"]["lint"]["mccabe"]["max-complexity"] == RUFF_MAX_COMPLEXITY
    assert _ruff_c901(RUFF_MAX_COMPLEXITY) == []


# ---- small files -------------------------------------------------------------------------------
# The largest module after the splits of metrics.py, console.py and gates.py (emulator/server.py).
# Lower it when the largest file shrinks, never raise it quietly: split by concern instead.
MODULE_LINE_BUDGET = 497
# Exempt by design, each with its reason:
LONG_MODULES = {}


def test_no_module_exceeds_the_line_budget():
    over = {
        str(path.relative_to(PACKAGE)): n
        for path in sorted(PACKAGE.rglob("*.py"))
        if (n := len(path.read_text().splitlines())) > MODULE_LINE_BUDGET
    }
    assert set(over) - set(LONG_MODULES) == set(), f"over {MODULE_LINE_BUDGET} lines: {over}"
    # an exemption whose file shrank under the budget (or went away) is no longer needed
    assert set(over) >= set(LONG_MODULES), f"drop the exemption: {set(LONG_MODULES) - set(over)}"


# A test file says what it proves in its name: one concern a file, split by concern past this many lines.
TEST_FILE_LINE_BUDGET = 400


def test_no_test_file_exceeds_its_budget():
    tests = Path(__file__).resolve().parent
    over = {
        str(path.relative_to(tests)): n
        for path in sorted(tests.rglob("*.py"))
        if (n := len(path.read_text().splitlines())) > TEST_FILE_LINE_BUDGET
    }
    assert over == {}, (
        f"test files over {TEST_FILE_LINE_BUDGET} lines, split them by concern: {over}"
    )


# ---- the round's figures (issue 52 item 8): targets the merged round must meet -----------------
# Functions over 50 lines, modules over 400 lines, `# fmt: skip` and the scars a reformat left in
# comments (a paragraph broken around a one-word line, a divider split in two); and the package's
# size, which may not grow: consolidation pays for features. Issue 52 asked for 42,940 lines (the
# round's start); the round ended at 43,800 (+2%, six features against ~1,000 lines consolidated):
# the budget holds that, and each round lowers it, never raises it.
FUNCTION_LINES = 50
LONG_FUNCTIONS_OVER_50_BUDGET = 18
MODULE_LINES = 400
LONG_MODULES_OVER_400_BUDGET = 2
FMT_SKIP_BUDGET = 13
PACKAGE_LINE_BUDGET = 42_926  # `wc -l` over composegen/**/*.py; the target was 42,940
_COMMENT = re.compile(r"^\s*# ?(.*)$")
_DIVIDER = re.compile(r"^[-=]{4,}")


def test_few_functions_run_past_50_lines():
    long = [
        where
        for where, node in package_functions()
        if (node.end_lineno or node.lineno) - node.lineno + 1 > FUNCTION_LINES
    ]
    assert len(long) <= LONG_FUNCTIONS_OVER_50_BUDGET, "\n".join(long)


def test_few_modules_run_past_400_lines():
    over = [
        f"{path.relative_to(PACKAGE)} ({n})"
        for path in sorted(PACKAGE.rglob("*.py"))
        if (n := len(path.read_text().splitlines())) > MODULE_LINES
    ]
    assert len(over) <= LONG_MODULES_OVER_400_BUDGET, "\n".join(over)


def test_the_package_does_not_grow():
    assert len(package_lines()) <= PACKAGE_LINE_BUDGET


def test_few_fmt_skips():
    skips = [line for line in package_lines() if line.rstrip().endswith("# fmt: skip")]
    assert len(skips) <= FMT_SKIP_BUDGET, f"{len(skips)} `# fmt: skip`"


def reformat_scars(lines: list[str]) -> list[int]:
    """Line numbers (1-based) of comment lines a reformat broke: a lone word inside a comment
    paragraph (text on both sides), or a divider's dashes pushed onto a line of their own."""
    found = []
    for i, line in enumerate(lines):
        this = _COMMENT.match(line)
        if this is None or i == 0:
            continue
        body = this.group(1).strip()
        prev = _COMMENT.match(lines[i - 1])
        after = _COMMENT.match(lines[i + 1]) if i + 1 < len(lines) else None
        if prev is None:
            continue
        before = prev.group(1).strip()
        if _DIVIDER.match(body) and set(body) <= set("-=") and _DIVIDER.match(before):
            found.append(i + 1)
        elif after and len(body.split()) == 1 and before and not _DIVIDER.match(body):
            nxt = after.group(1).strip()
            if nxt and not _DIVIDER.match(nxt):
                found.append(i + 1)
    return found


def test_the_scar_counter_sees_both_kinds_and_spares_a_paragraphs_end():
    broken = ["# a paragraph that ran", "# long", "# and went on", "# ---- a divider", "# -----"]
    assert reformat_scars(broken) == [2, 5]
    assert reformat_scars(["# ends on a", "# word.", "x = 1", "# ---- whole ----"]) == []


def test_no_reformat_scars():
    scars = [
        f"{path.relative_to(PACKAGE)}:{n}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for n in reformat_scars(path.read_text().splitlines())
    ]
    assert scars == [], "\n".join(scars)


# ---- no command over 11 parameters (issue 52 item 5): wide commands take option groups --------
COMMAND_PARAMETERS = 11


def _commands(typer_app, prefix=""):
    for info in typer_app.registered_commands:
        yield f"{prefix}{info.name or info.callback.__name__}", info.callback
    for group in typer_app.registered_groups:
        yield from _commands(group.typer_instance, f"{prefix}{group.name} ")


def test_no_command_takes_more_than_11_parameters():
    import inspect

    from composegen.cli.app import app
    from composegen.cli.main import load_commands

    load_commands()
    # a `grouped` command: its own signature, where a dataclass group counts as one parameter
    wide = {
        name: n
        for name, callback in _commands(app)
        if (n := len(inspect.signature(callback.__dict__.get("__wrapped__", callback)).parameters))
        > COMMAND_PARAMETERS
    }
    assert len(list(_commands(app))) > 30 and wide == {}, wide
