"""Every report's JSON Schema by name, for `composegen schema --report NAME` (generated, never restated).

Each entry is "module:Model"; the module is imported only when its schema is asked for, so the profile
commands never pay for the stack or evidence modules.
"""

from __future__ import annotations

import importlib
from typing import Any

from composegen.errors import BadInput

REPORTS: dict[str, str] = {}


def names() -> list[str]:
    return sorted(REPORTS)


def schema(name: str) -> dict[str, Any]:
    target = REPORTS.get(name)
    if target is None:
        import difflib

        close = difflib.get_close_matches(name, REPORTS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise BadInput(f"--report: no report named {name!r}{hint}; known: {', '.join(names())}")
    module, model = target.split(":")
    schema: dict[str, Any] = getattr(importlib.import_module(module), model).json_schema()
    schema.setdefault("title", model)
    schema["$id"] = f"composegen:report/{name}"
    return schema
