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
from collections.abc import Iterable
from typing import Any

SECRET_RE = re.compile(r"(TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL)", re.I)
MIN_SECRET_CHARS = 4  # masking "1" would shred every line


def secret_values() -> list[str]:
    """Values of secret-named variables in this environment, longest first."""
    values = {v for k, v in os.environ.items() if SECRET_RE.search(k) and len(v) >= MIN_SECRET_CHARS}
    return sorted(values, key=len, reverse=True)


def mask(text: str, secrets: list[str] | None = None) -> str:
    """`text` with every secret value (secret_values, or `secrets`) replaced by ***."""
    for secret in secret_values() if secrets is None else secrets:
        if secret in text:
            text = text.replace(secret, "***")
    return text


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
    """JSON is indented for a person at a terminal and compact when piped; `pretty` forces either."""
    return sys.stdout.isatty() if pretty is None else pretty


def emit_json(obj: Any, *, pretty: bool | None = None) -> None:
    """Sorted keys; indented or compact as pretty_output says (CPython's C encoder only runs without
    indent, and is ~5x faster on a 10,000-entry shm report)."""
    indent = 2 if pretty_output(pretty) else None
    separators = None if indent else (",", ":")
    text = json.dumps(obj, indent=indent, separators=separators, sort_keys=True, default=_default)
    secrets = [s for s in secret_values() if json.dumps(s)[1:-1] in text]
    if secrets:  # rare: mask the strings themselves, so the document stays valid JSON
        doc = mask_json(json.loads(text), secrets)
        text = json.dumps(doc, indent=indent, separators=separators, sort_keys=True)
    sys.stdout.write(text + "\n")


def write_pieces(pieces: Iterable[str]) -> None:
    """A large compact JSON document written as it is produced, never held as one string."""
    secrets = secret_values()
    for piece in pieces:
        sys.stdout.write(mask(piece, secrets) if secrets else piece)
    sys.stdout.write("\n")


def _default(obj: Any) -> Any:
    if hasattr(obj, "to_json"):
        return obj.to_json()
    if hasattr(obj, "__dataclass_fields__"):
        import dataclasses

        return dataclasses.asdict(obj)
    return str(obj)


def out(text: str = "") -> None:
    text = mask(text)
    sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")


def err(text: str) -> None:
    text = mask(text)
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
    return repr(value)
