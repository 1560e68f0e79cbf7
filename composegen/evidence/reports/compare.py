"""The `compare` report's shape (composegen schema --report compare); evidence/compare.py fills
it."""

from __future__ import annotations

from pydantic import Field

from composegen.bench.reports import BenchDeltas
from composegen.diff import semantic
from composegen.report import Report, described, nullable

Scalar = int | float | str | None


class CompareSide(Report):
    run: str
    profile: str
    hash: str | None
    source: str
    max_model_len: int | None
    emulated: bool = Field(
        default=False, description="the run was on the emulated vLLM (a test double), not a model"
    )


class CompareRow(Report):
    metric: str
    label: str
    unit: str
    a: Scalar
    b: Scalar
    delta: int | float | None = Field(description="b - a")
    pct: float | None = described(
        "delta / a x 100, 3 decimals; null where only the absolute change counts"
    )


class ConfigDifferences(Report):
    functional: list[semantic.DiffChange] = described("diff changes (`schema --report diff`)")
    identity: list[semantic.DiffChange]
    notes: list[str]


class CapacityChange(Report):
    flag: bool | None = described(
        "|kv_tokens_pct - kv_bytes_pct| / 100 > threshold; null when unknown"
    )
    kv_bytes_pct: float | None
    kv_tokens_pct: float | None
    threshold: float


class CompareReport(Report):
    """`composegen compare A B --json`."""

    a: CompareSide
    b: CompareSide
    rows: list[CompareRow]
    config: ConfigDifferences
    unexplained_capacity_change: CapacityChange
    notes: list[str]
    comparability: str | None = nullable(
        "null: comparable; else `not comparable: ` and each reason"
    )
    bench: BenchDeltas | None = nullable("per-level load-benchmark deltas, null without")
