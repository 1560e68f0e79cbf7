"""The startup report as aligned text (`composegen startup` without --json)."""

from __future__ import annotations

import json
from typing import Any

from composegen.vllm.reports import StartupError, StartupReport

_APART = ("errors", "runtime_errors", "warnings", "effective_args", "mismatches")


def _error_lines(errors: list[StartupError]) -> list[str]:
    out = []
    for error in errors:
        est = error.estimated_max_model_len
        extra = f" (estimated max model len {est})" if est is not None else ""
        out.append(f"  [{error.kind}]{extra} {error.line}")
        out.append(f"    hint: {error.hint}")
    return out


def _shown(value: Any) -> str:
    """One figure of the report as a row shows it: lists joined, yes/no, "-" for none."""
    if isinstance(value, list):
        value = ", ".join(v if isinstance(v, str) else f"{v:g}" for v in value) if value else "-"
    elif isinstance(value, bool):
        value = "yes" if value else "no"
    return "-" if value is None else str(value)


def format_text(report: StartupReport) -> str:
    # the scalar figures in the report's own order, whatever fields it grows
    data = report.to_json()
    rows = [(key, _shown(value)) for key, value in data.items() if key not in _APART]
    args = report.effective_args
    rows.append(("effective_args", "unknown" if args is None else f"{len(args)} non-default args"))
    width = max(len(k) for k, _ in rows) + 1
    out = [f"{k + ':':<{width}} {v}" for k, v in rows]
    for name, value in (args or {}).items():
        out.append(f"  {name} = {json.dumps(value)}")
    errors = report.errors
    out.append(f"{'errors:':<{width}} {len(errors) or 'none'}")
    out += _error_lines(errors)
    runtime = report.runtime_errors
    if runtime:
        out.append(
            f"{'runtime_errors:':<{width}} {len(runtime)} (after ready; the server kept serving)"
        )
        out += _error_lines(runtime)
    out += [f"warning: {w}" for w in report.warnings]
    return "\n".join(out) + "\n"
