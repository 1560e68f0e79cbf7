"""Printing results: JSON for machines (sorted keys, stable shapes), plain text for people."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable
from typing import Any


def pretty_output(pretty: bool | None = None) -> bool:
    """JSON is indented for a person at a terminal and compact when piped; `pretty` forces either."""
    return sys.stdout.isatty() if pretty is None else pretty


def emit_json(obj: Any, *, pretty: bool | None = None) -> None:
    """Sorted keys; indented or compact as pretty_output says (CPython's C encoder only runs without
    indent, and is ~5x faster on a 10,000-entry shm report)."""
    indent = 2 if pretty_output(pretty) else None
    separators = None if indent else (",", ":")
    options = {"indent": indent, "separators": separators, "sort_keys": True, "default": _default}
    try:
        text = json.dumps(obj, allow_nan=False, **options)  # type: ignore[arg-type]
    except ValueError:  # NaN or an infinity (a float near 1.8e308 that overflowed): JSON has neither, null it
        text = json.dumps(_finite(json.loads(json.dumps(obj, default=_default))), allow_nan=False, **options)  # type: ignore[arg-type]
    sys.stdout.write(text + "\n")


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if value - value == 0 else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def write_pieces(pieces: Iterable[str]) -> None:
    """A large compact JSON document written as it is produced, never held as one string."""
    for piece in pieces:
        sys.stdout.write(piece)
    sys.stdout.write("\n")


def _default(obj: Any) -> Any:
    if hasattr(obj, "to_json"):
        return obj.to_json()
    if hasattr(obj, "__dataclass_fields__"):
        import dataclasses

        return dataclasses.asdict(obj)
    return str(obj)


# What a terminal would act on or show other than as written: C0 controls but newline and tab (ESC starts
# clipboard writes and screen clears), DEL, C1 controls, line/paragraph separators, bidi overrides and
# isolates (they reorder what follows), lone surrogates (unencodable).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")


def inert(text: str) -> str:
    """`text` with every character a terminal would act on shown as an escape (`\\x1b`, `\\u202e`)."""
    if not _UNSAFE.search(text):
        return text
    return _UNSAFE.sub(lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100 else f"\\u{ord(m[0]):04x}", text)


def out(text: str = "") -> None:
    """Text for a person: whatever it quotes (a profile's description, a bundle's strings, a server's
    error text) reaches the terminal inert."""
    text = inert(text)
    sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")


def err(text: str) -> None:
    text = inert(text)
    sys.stderr.write(text if text.endswith("\n") else text + "\n")


def table(rows: list[list[str]], header: list[str] | None = None) -> str:
    rows = [header, *rows] if header else rows
    if not rows:
        return ""
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines) + "\n"


def show_value(value: Any) -> str:
    """A loaded YAML value as an error message quotes it (YAML's `yes` is a boolean: say so)."""
    if isinstance(value, bool):
        return f"{str(value).lower()} (a YAML boolean)"
    if isinstance(value, (dict, list)):
        return type(value).__name__
    shown = repr(value)
    return shown if len(shown) <= 80 else f"{shown[:60]}… ({len(shown)} characters)"  # a message stays one line


_MD_SPECIAL = re.compile(r"([\\`\[\]<|])")  # a cell break, code, links and images, HTML; emphasis is harmless


def md_cell(text: object) -> str:
    """Text from a bundle or a server as one Markdown table cell: on one line, and the characters that
    would change the table or the page (a `|` ending the cell, `![x](url)` becoming an image, `<img>`)
    backslash-escaped. Names, paths and figures pass unchanged."""
    line = " ".join(str(text).split())
    return _MD_SPECIAL.sub(r"\\\1", line)
