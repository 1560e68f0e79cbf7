"""The gates' answer checks: a failed check (GateFailed), JSON-schema validation of answers and
tool-call arguments, fence stripping, parser markup leaking into text."""

from __future__ import annotations

import json
import re
from typing import Any

GARBAGE_MARKERS = ("<|", "<｜", "<<tool", "function=", "\ufffd", "</think>")
_FENCE = re.compile(r"^```[^\n]*\n?|\n?```$")


class GateFailed(Exception):
    """One gate's check did not hold; the message is the gate's `reason`."""

    def __init__(self, reason: str, **details: Any):
        super().__init__(reason)
        self.details = details


def strip_fences(text: str | None) -> str:
    """A JSON answer wrapped in a Markdown code fence still counts as JSON."""
    return _FENCE.sub("", (text or "").strip()).strip()


def validate(instance: Any, schema: dict) -> str | None:
    """None when valid, else the first validation error, short."""
    import jsonschema

    error = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(schema).iter_errors(instance)
    )
    if error is None:
        return None
    return f"{'/'.join(str(p) for p in error.absolute_path) or '(root)'}: {error.message}"


def check_arguments(arguments: str | None, schema: dict, details: dict) -> None:
    try:
        args = json.loads(arguments or "")
    except ValueError as exc:
        raise GateFailed(f"the call's arguments are not valid JSON ({exc})", **details) from None
    if problem := validate(args, schema):
        raise GateFailed(
            f"the call's arguments are JSON but do not validate against the tool's schema: {problem}",
            **details,
        )


def garbage(text: str) -> str | None:
    return next((m for m in GARBAGE_MARKERS if m in (text or "")), None)
