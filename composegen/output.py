"""Printing results: JSON for machines (sorted keys, stable shapes), plain text for people.

Everything printed passes `mask`: the values this process's environment holds for secret-named
variables (HF_TOKEN, VLLM_API_KEY, …: SECRET_RE) become ***, in composegen's own lines and in the
text of compose, docker and ssh errors passed through.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

SECRET_RE = re.compile(r"(TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL)", re.I)
MIN_SECRET_CHARS = 4  # masking "1" would shred every line
# The password of a `scheme://user:password@host` URL (DOCKER_HOST=tcp://u:p@h, a proxy, a
# registry): the
# user stays (it says which account), the password goes, wherever the URL came from.
USERINFO_RE = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:)[^@\s/]+@")


def secret_values() -> list[str]:
    """Values of secret-named variables in this environment, longest first."""
    values = {
        v for k, v in os.environ.items() if SECRET_RE.search(k) and len(v) >= MIN_SECRET_CHARS
    }
    return sorted(values, key=len, reverse=True)


def mask(text: str, secrets: list[str] | None = None) -> str:
    """`text` with every secret value (secret_values, or `secrets`) and every URL's password
    replaced by ***."""
    for secret in secret_values() if secrets is None else secrets:
        if secret in text:
            text = text.replace(secret, "***")
    return USERINFO_RE.sub(r"\1***@", text) if "://" in text else text


def mask_json(value: Any, secrets: list[str]) -> Any:
    """Every string (and key) of a JSON value masked."""
    if isinstance(value, str):
        return mask(value, secrets)
    if isinstance(value, dict):
        return {mask(str(k), secrets): mask_json(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [mask_json(v, secrets) for v in value]
    return value


def pretty_output(pretty: bool | None = None) -> bool:
    """JSON is indented for a person at a terminal and compact when piped; `pretty` forces
    either."""
    return sys.stdout.isatty() if pretty is None else pretty


def emit_json(obj: Any, *, pretty: bool | None = None) -> None:
    """Sorted keys; indented or compact as pretty_output says (CPython's C encoder only runs without
    indent, and is ~5x faster on a 10,000-entry shm report)."""
    indent = 2 if pretty_output(pretty) else None
    separators = None if indent else (",", ":")
    options = {"indent": indent, "separators": separators, "sort_keys": True, "default": _default}
    try:
        text = json.dumps(obj, allow_nan=False, **options)  # type: ignore[arg-type]
    # NaN or an infinity (a float near 1.8e308 that overflowed): JSON has neither, null it
    except ValueError:
        obj = _finite(json.loads(json.dumps(obj, default=_default)))
        text = json.dumps(obj, allow_nan=False, **options)  # type: ignore[arg-type]
    secrets = [s for s in secret_values() if json.dumps(s)[1:-1] in text]
    # rare: mask the strings themselves (valid JSON)
    if secrets or ("://" in text and USERINFO_RE.search(text)):
        text = json.dumps(mask_json(json.loads(text), secrets), allow_nan=False, **options)  # type: ignore[arg-type]
    sys.stdout.write(text + "\n")


class Reported(Protocol):
    """A report model (report.py's Report): what `--json` prints."""

    def to_json(self) -> Any: ...


Text = str | Callable[[], str]


class Output:
    """The one output decision of a command run. `--json` prints the report's model (its shape:
    `composegen schema --report NAME`) and nothing else on stdout; otherwise text for a person. A
    command hands its report and the text that tells it here and never branches on --json itself
    (tests/test_house_figures.py counts the branches). Text may be a function: the JSON run never
    formats it."""

    def __init__(self, json_: bool = False) -> None:
        self.json = json_

    def report(
        self, report: Reported | Mapping[str, object] | list[Any], text: Text | None = None
    ) -> None:
        """The command's result: its JSON (a model, or a record read back as written), or its
        text."""
        if self.json:
            if isinstance(report, Mapping):
                emit_json(dict(report))
            else:
                emit_json(report if isinstance(report, list) else report.to_json())
        elif text is not None:
            self.say(text)

    def say(self, text: Text) -> None:
        """A line for a person on stdout; under --json stdout holds the one document, so nothing."""
        if not self.json:
            out(text() if callable(text) else text)

    def note(self, text: str) -> None:
        """Progress for a person on stderr; nothing under --json (scripts read the exit code)."""
        if not self.json:
            err(text)


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
    secrets = secret_values()
    for piece in pieces:
        sys.stdout.write(mask(piece, secrets))
    sys.stdout.write("\n")


def _default(obj: Any) -> Any:
    if hasattr(obj, "to_json"):
        return obj.to_json()
    if hasattr(obj, "__dataclass_fields__"):
        import dataclasses  # why: the `shm` fast path imports output; dataclasses pulls in inspect

        return dataclasses.asdict(obj)
    return str(obj)


# What a terminal would act on or show other than as written: C0 controls but newline and tab
# (ESC starts clipboard writes and screen clears), DEL, C1 controls, line/paragraph separators,
# bidi overrides and isolates (they reorder what follows), lone surrogates (unencodable).
_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]"
)


def inert(text: str) -> str:
    """`text` with every character a terminal would act on shown as an escape (`\\x1b`,
    `\\u202e`)."""
    if not _UNSAFE.search(text):
        return text
    return _UNSAFE.sub(
        lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100 else f"\\u{ord(m[0]):04x}", text
    )


def out(text: str = "") -> None:
    """Text for a person: whatever it quotes (a profile's description, a bundle's strings, a
    server's error text) reaches the terminal inert, and no secret's value reaches it at all; at a
    terminal, folded at words under its width."""
    text = fold(inert(mask(text)), terminal_width())
    sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")


def err(text: str) -> None:
    text = fold(inert(mask(text)), terminal_width(sys.stderr))
    sys.stderr.write(text if text.endswith("\n") else text + "\n")


def fold(text: str, width: int | None, indent: str = "  ") -> str:
    """TEXT's lines wider than WIDTH (a terminal's; None: piped, as they are) broken at spaces, never
    inside a word or a path (one wider than a line stays whole), each continuation indented as its
    line plus INDENT. Every line a person reads passes here (out, err)."""
    if not width or all(len(line) <= width for line in text.split("\n")):
        return text
    import textwrap  # why: only a line wider than the terminal needs it

    def one(line: str) -> str:
        hang = line[: len(line) - len(line.lstrip())] + indent
        wrap = textwrap.fill(
            line, width, subsequent_indent=hang, break_long_words=False, break_on_hyphens=False
        )
        return wrap if len(line) > width else line

    return "\n".join(map(one, text.split("\n")))


def table(
    rows: list[list[str]],
    header: list[str] | None = None,
    *,
    width: int | None = None,
    drop: tuple[str, ...] = (),
) -> str:
    """Columns padded to their widest cell. With `width` (a terminal's), the header names in `drop`
    are left out, first to last, until a row fits, as `docker ps` users expect; a line still too
    wide is cut with an ellipsis, and a last line names what was left out. Without `width` (piped):
    every column, full rows."""
    rows = [header, *rows] if header else rows
    if not rows:
        return ""
    keep = list(range(len(rows[0])))
    hidden: list[str] = []

    def lines() -> list[str]:
        widths = {i: max(len(str(r[i])) for r in rows) for i in keep}
        return ["  ".join(str(r[i]).ljust(widths[i]) for i in keep).rstrip() for r in rows]

    drawn, names = lines(), header or []
    for name in drop:
        if width is None or max(len(line) for line in drawn) <= width:
            break
        if name in names:
            keep.remove(names.index(name))
            hidden.append(name)
            drawn = lines()
    if width is not None:
        drawn = [line if len(line) <= width else line[: width - 1] + "…" for line in drawn]
        if hidden:
            note = f"(not shown at {width} columns: {', '.join(hidden)}; a pipe or --json shows every column)"
            drawn += fold(note, width, "").split("\n")
    return "\n".join(drawn) + "\n"


def terminal_width(stream: Any = None) -> int | None:
    """The width of the terminal `stream` (stdout) writes to; None when it is not a terminal."""
    import shutil  # why: shutil loads the compression modules; `shm --json` (fast path) never asks

    stream = stream or sys.stdout
    try:
        if not stream.isatty():
            return None
    except (AttributeError, ValueError):
        return None
    return shutil.get_terminal_size().columns


def show_value(value: Any) -> str:
    """A loaded YAML value as an error message quotes it (YAML's `yes` is a boolean: say so)."""
    if isinstance(value, bool):
        return f"{str(value).lower()} (a YAML boolean)"
    if isinstance(value, (dict, list)):
        return type(value).__name__
    shown = repr(value)
    # a message stays one line
    return shown if len(shown) <= 80 else f"{shown[:60]}… ({len(shown)} characters)"


# a cell break, code, links and images, HTML; emphasis is harmless
_MD_SPECIAL = re.compile(r"([\\`\[\]<|])")


def md_cell(text: object) -> str:
    """Text from a bundle or a server as one Markdown table cell: on one line, and the characters
    that would change the table or the page (a `|` ending the cell, `![x](url)` becoming an image,
    `<img>`) backslash-escaped. Names, paths and figures pass unchanged."""
    line = " ".join(str(text).split())
    return _MD_SPECIAL.sub(r"\\\1", line)
