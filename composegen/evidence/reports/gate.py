"""The `gate` report's shape (composegen schema --report gate); evidence/gates.py fills it."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from composegen.report import Report


class GateRow(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    passed: bool
    latency_s: float
    reason: str | None  # null when passed; else the cause (gate_reasons.py)
    details: dict[str, Any]


class ToolCounts(BaseModel):
    model_config = ConfigDict(extra="forbid")
    passed: int
    total: int


class GateResult(Report):
    model: str
    base_url: str
    gates: list[GateRow]
    passed: int
    total: int
    tools: ToolCounts | None  # null when the tools gate did not run
    ok: bool
