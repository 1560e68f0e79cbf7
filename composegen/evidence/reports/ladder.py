"""The `ladder` report's shape (composegen schema --report ladder); evidence/ladder.py fills it."""

from __future__ import annotations

from pydantic import Field

from composegen.report import Report, described, nullable


class LadderRow(Report):
    target: int = Field(description="requested prompt tokens")
    tokenized: int | None = nullable("/tokenize count of the prompt sent")
    prompt_tokens: int | None = nullable("API-reported prompt tokens")
    ttft_s: float | None = None
    prefill_tok_s: float | None = nullable("prompt_tokens / ttft_s (effective: includes queueing)")
    decode_tok_s: float | None = nullable("(completion_tokens − 1) / (end of stream − first token)")
    e2e_s: float | None = None
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None
    finish_reason: str | None = None
    ok: bool
    reason: str | None = None


class LadderWarmup(Report):
    """The one request the ladder sends before its first rung, not measured: a server's first
    requests after a start are slow (0.83–0.96 s TTFT on a real H200 where the next rows took 24–42
    ms)."""

    sent: bool
    prompt_tokens: int | None = nullable("API-reported prompt tokens of the warm-up")
    ttft_s: float | None = nullable("its TTFT, for the record; never part of a row")
    reason: str | None = nullable("why it failed (the rungs were still measured)")


class LadderResult(Report):
    """`composegen ladder --json`; the `ladder` of an evidence bundle."""

    model: str
    max_model_len: int
    max_tokens: int
    tolerance: float
    ok: bool = Field(description="every row ok")
    targets: list[LadderRow]
    largest_prompt_tokens: int | None = described(
        "largest API-reported prompt of a completed request"
    )
    warmup: LadderWarmup | None = nullable("the unmeasured request sent first (null: older runs)")
