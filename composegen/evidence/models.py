"""The JSON shapes of the ladder and qualify results (bench's are in benchstats.py), as report models.

run_ladder and qualify build their results as dicts (the bundle and compare read them as such) and pass
them through these models on the way out, so what they return is exactly what `composegen schema
--report ladder|qualify` documents.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from composegen.evidence.benchstats import BenchResult
from composegen.report import Report


class LadderRow(Report):
    target: int = Field(description="requested prompt tokens")
    tokenized: int | None = Field(None, description="/tokenize count of the prompt sent")
    prompt_tokens: int | None = Field(None, description="API-reported prompt tokens")
    ttft_s: float | None = None
    prefill_tok_s: float | None = Field(None, description="prompt_tokens / ttft_s (effective: includes queueing)")
    decode_tok_s: float | None = Field(None, description="(completion_tokens − 1) / (end of stream − first token)")
    e2e_s: float | None = None
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None
    finish_reason: str | None = None
    ok: bool
    reason: str | None = None


class LadderWarmup(Report):
    """The one request the ladder sends before its first rung, not measured: a server's first requests
    after a start are slow (0.83–0.96 s TTFT on a real H200 where the next rows took 24–42 ms)."""

    sent: bool
    prompt_tokens: int | None = Field(None, description="API-reported prompt tokens of the warm-up")
    ttft_s: float | None = Field(None, description="its TTFT, for the record; never part of a row")
    reason: str | None = Field(None, description="why it failed (the rungs were still measured)")


class LadderResult(Report):
    """`composegen ladder --json`; the `ladder` of an evidence bundle."""

    model: str
    max_model_len: int
    max_tokens: int
    tolerance: float
    ok: bool = Field(description="every row ok")
    targets: list[LadderRow]
    largest_prompt_tokens: int | None = Field(description="largest API-reported prompt of a completed request")
    warmup: LadderWarmup | None = Field(None, description="the unmeasured request sent first (null: older runs)")


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
    gates: dict[str, Any] | None
    bench: BenchResult | None = None
