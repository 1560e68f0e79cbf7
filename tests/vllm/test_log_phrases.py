"""vLLM's log knowledge is written once: every phrase of the pattern table (vllm/startup_rules.py) is
spelled in no other module's code. The emulator is the named exception: it writes those lines.

A phrase is a literal run of a table pattern (or a plain string of the table) of at least MIN_WORDS
words or MIN_CHARS characters (shorter runs such as "waiting for" are plain English); code means string
constants outside docstrings (comments and docstrings may quote the log)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from composegen.vllm import startup_rules

PACKAGE = Path(__file__).resolve().parents[2] / "composegen"
TABLE = PACKAGE / "vllm" / "startup_rules.py"
WRITERS = PACKAGE / "emulator"  # the test double writes vLLM's lines; it never reads them
MIN_WORDS = 3
MIN_CHARS = 20
_META = set("()[]{}|?*+^$.")


def literal_runs(pattern: str) -> list[str]:
    """The literal character runs of a regular expression (a char class or a metacharacter ends a run;
    a character made optional by the quantifier after it is dropped)."""
    runs, run, i = [], "", 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            if nxt.isalnum():  # \d, \s, \b, \w: a class, not a literal
                runs.append(run)
                run = ""
            else:
                run += nxt
            i += 2
            continue
        if ch == "[":
            runs.append(run)
            run = ""
            i = pattern.index("]", i + 2) + 1
            continue
        if ch in _META:
            if ch in "?*{" and run:
                run = run[:-1]
            runs.append(run)
            run = ""
        else:
            run += ch
        i += 1
    runs.append(run)
    return [r.strip() for r in runs]


def table_phrases() -> set[str]:
    phrases: set[str] = set()
    for name, value in vars(startup_rules).items():
        if name.startswith("_") or not name.isupper():
            continue
        values = value if isinstance(value, list) else [value]
        for item in values:
            parts = item if isinstance(item, tuple) else (item,)
            for part in parts:
                if isinstance(part, re.Pattern):
                    phrases.update(literal_runs(part.pattern))
                # hints are prose, not phrases
                elif isinstance(part, str) and "{" not in part and len(part) < 80:
                    phrases.add(part.strip())
    return {p for p in phrases if " " in p and (len(p.split()) >= MIN_WORDS or len(p) >= MIN_CHARS)}


def code_strings(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]


def _spellings(phrase: str) -> set[str]:
    """The phrase as a plain string and as a regular expression would spell it."""
    return {phrase, re.escape(phrase), re.sub(r"([.()])", r"\\\1", phrase)}


def test_the_table_has_the_phrases_both_readers_need():
    phrases = table_phrases()
    for expected in (
        "Application startup complete.",
        "Model loading took",
        "Graph capturing finished in",
    ):
        assert expected in phrases
    assert any("init engine (profile, create kv cache, warmup model) took" in p for p in phrases)
    assert len(phrases) > 40


def test_no_vllm_log_phrase_is_spelled_outside_the_table():
    phrases = table_phrases()
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == TABLE or WRITERS in path.parents:
            continue
        for text in code_strings(path):
            for phrase in phrases:
                if any(spelled in text for spelled in _spellings(phrase)):
                    found.append(f"{path.relative_to(PACKAGE.parent)}: {phrase!r}")
    assert not found, "vLLM log phrases outside vllm/startup_rules.py:\n" + "\n".join(
        sorted(set(found))
    )


def test_the_scan_finds_a_phrase_in_code_and_not_in_a_docstring(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        '"""Waits for `Application startup complete.`"""\nREADY = "Application startup complete."\n'
    )
    assert code_strings(module) == ["Application startup complete."]
    assert "Graph capturing finished in" in literal_runs(
        r"Graph capturing finished in (?P<s>\d+) secs"
    )
