"""The `qualify` report's shape (composegen schema --report qualify); evidence/qualify.py fills
it."""

from __future__ import annotations

from pydantic import Field

from composegen.bench.reports import BenchResult
from composegen.evidence.reports.gate import GateResult
from composegen.evidence.reports.ladder import LadderResult
from composegen.evidence.reports.sleep import SleepCycles
from composegen.report import Report

Value = int | float | str | None


class Criterion(Report):
    name: str
    measured: Value
    threshold: Value
    passed: bool
    reason: str | None = Field(description="null when passed")


class QualifyResult(Report):
    """`composegen qualify --json`."""

    profile: str
    hash: str
    qualified: bool
    criteria: list[Criterion]
    emulated: bool
    run: str = Field(description="the evidence bundle written")
    ladder: LadderResult | None
    gates: GateResult | None
    bench: BenchResult | None = None
    sleep: SleepCycles | None = None  # `--sleep-cycles N` (evidence/sleepcycles.py)
