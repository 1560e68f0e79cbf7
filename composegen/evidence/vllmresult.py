"""One bench level in exactly `vllm bench serve --save-result`'s result shape, so tooling that reads vLLM's
files reads composegen's (`bench --save-vllm-results DIR` writes `vllm-bench-serve-cN.json` per level).

The reference is vLLM 0.26.0's own files (tests/data/real-0.26.0-h200-graphs/vllm-bench-serve-c*.json):
the same keys in the same order, the same units (ms, unrounded), vLLM's definitions — TPOT per request
with ≥ 2 output tokens, ITL every gap between streamed events, numpy's linear percentiles and population
standard deviation; `max_output_tokens_per_s` is the most streamed events in one whole second of the
run, `max_concurrent_requests` the most requests active during one whole second (vLLM's buckets).
`request_rate` is "inf" (closed loop), `burstiness` 1.0, `rtfx` 0.0 (no audio), `errors` is absent (vLLM
writes it only with --save-detailed). The `spec_decode_*` fields come from the server's /metrics
(`vllm:spec_decode_*_total` counters before and after the level), present only when it speculates.
"""

from __future__ import annotations

import math
import time
from typing import Any

from pydantic import Field

from composegen.evidence.benchstats import Sample, percentile
from composegen.report import Report

SPEC_COUNTERS = {
    "drafts": "vllm:spec_decode_num_drafts_total",
    "draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
    "accepted": "vllm:spec_decode_num_accepted_tokens_total",
}
SPEC_PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
METRICS_CAP = 16 << 20  # bytes of /metrics read at most


class VllmBenchServeResult(Report):
    """One level as `vllm bench serve --save-result` writes it (`composegen schema --report vllm-bench-serve`);
    the spec_decode_* keys are written only when the server speculated, as vLLM does."""

    date: str
    endpoint_type: str = "openai-chat"
    backend: str = "openai-chat"
    label: str | None = None
    model_id: str
    tokenizer_id: str
    num_prompts: int
    request_rate: str = "inf"
    burstiness: float = 1.0
    max_concurrency: int
    duration: float
    completed: int
    failed: int
    total_input_tokens: int
    total_output_tokens: int
    request_throughput: float
    request_goodput: float | None = None
    output_throughput: float
    total_token_throughput: float
    max_output_tokens_per_s: float
    max_concurrent_requests: int
    rtfx: float = 0.0
    mean_ttft_ms: float
    median_ttft_ms: float
    std_ttft_ms: float
    p50_ttft_ms: float
    p90_ttft_ms: float
    p99_ttft_ms: float
    mean_tpot_ms: float
    median_tpot_ms: float
    std_tpot_ms: float
    p50_tpot_ms: float
    p90_tpot_ms: float
    p99_tpot_ms: float
    mean_itl_ms: float
    median_itl_ms: float
    std_itl_ms: float
    p50_itl_ms: float
    p90_itl_ms: float
    p99_itl_ms: float
    mean_e2el_ms: float
    median_e2el_ms: float
    std_e2el_ms: float
    p50_e2el_ms: float
    p90_e2el_ms: float
    p99_e2el_ms: float
    spec_decode_acceptance_rate: float | None = Field(None, description="accepted / draft tokens, percent")
    spec_decode_acceptance_length: float | None = Field(None, description="1 + accepted tokens / drafts")
    spec_decode_num_drafts: int | None = None
    spec_decode_draft_tokens: int | None = None
    spec_decode_accepted_tokens: int | None = None
    spec_decode_per_position_acceptance_rates: list[float] | None = None

    def to_json(self) -> dict[str, Any]:
        data = super().to_json()
        if self.spec_decode_num_drafts is None:
            data = {k: v for k, v in data.items() if not k.startswith("spec_decode_")}
        return data


def _figures(name: str, seconds: list[float]) -> dict[str, float]:
    """vLLM's mean/median/std/p50/p90/p99 in ms; 0.0 without values (as numpy's over an empty list is)."""
    ms = [s * 1000 for s in seconds]
    if not ms:
        return {f"{stat}_{name}_ms": 0.0 for stat in ("mean", "median", "std", "p50", "p90", "p99")}
    mean = sum(ms) / len(ms)
    return {
        f"mean_{name}_ms": mean,
        f"median_{name}_ms": percentile(ms, 50),
        f"std_{name}_ms": math.sqrt(sum((v - mean) ** 2 for v in ms) / len(ms)),
        f"p50_{name}_ms": percentile(ms, 50),
        f"p90_{name}_ms": percentile(ms, 90),
        f"p99_{name}_ms": percentile(ms, 99),
    }


def _peaks(ok: list[Sample]) -> tuple[float, int]:
    """(most streamed events in one second, most requests active in one second), vLLM's whole-second buckets
    counted from the first request's start."""
    if not ok:
        return 0.0, 0
    first = min(s.started for s in ok)
    end = max(s.started + (s.e2el or 0.0) for s in ok)
    events = [0] * (math.ceil(end - first) + 1)
    active = [0] * len(events)
    for s in ok:
        start = s.started - first
        if s.ttft is not None and s.ttft > 0:
            at = start + s.ttft
            events[int(at)] += 1
            for gap in s.itls:
                at += gap
                events[min(int(at), len(events) - 1)] += 1
        for second in range(int(start), int(start + (s.e2el or 0.0)) + 1):
            active[min(second, len(active) - 1)] += 1
    return float(max(events)), max(active)


def level_result(
    model: str,
    concurrency: int,
    samples: list[Sample],
    duration: float,
    *,
    goodput: float | None = None,
    spec_decode: dict[str, Any] | None = None,
    when: float | None = None,
) -> VllmBenchServeResult:
    ok = [s for s in samples if s.error is None]
    inputs = sum(s.input_tokens for s in ok)
    outputs = sum(s.output_tokens for s in ok)
    per_s = (lambda n: n / duration) if duration > 0 else (lambda n: 0.0)
    max_tokens, max_active = _peaks(ok)
    figures: dict[str, Any] = {
        **_figures("ttft", [s.ttft for s in ok if s.ttft is not None]),
        **_figures("tpot", [t for s in ok if (t := s.tpot) is not None]),
        **_figures("itl", [gap for s in ok for gap in s.itls]),
        **_figures("e2el", [s.e2el for s in ok if s.e2el is not None]),
    }
    return VllmBenchServeResult.model_validate(
        dict(
            date=time.strftime("%Y%m%d-%H%M%S", time.localtime(when)),
            model_id=model,
            tokenizer_id=model,
            num_prompts=len(samples),
            max_concurrency=concurrency,
            duration=duration,
            completed=len(ok),
            failed=len(samples) - len(ok),
            total_input_tokens=inputs,
            total_output_tokens=outputs,
            request_throughput=per_s(len(ok)),
            request_goodput=goodput,
            output_throughput=per_s(outputs),
            total_token_throughput=per_s(inputs + outputs),
            max_output_tokens_per_s=max_tokens,
            max_concurrent_requests=max_active,
            **figures,
            **(spec_decode or {}),
        )
    )


def spec_counters(text: str) -> dict[str, Any]:
    """The speculative-decoding counters of one /metrics text, summed over engines: {drafts, draft_tokens,
    accepted, per_position: {position: accepted}}; {} when the server does not speculate."""
    from prometheus_client.parser import text_string_to_metric_families

    found: dict[str, Any] = {"per_position": {}}
    names = {v: k for k, v in SPEC_COUNTERS.items()}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in names and math.isfinite(sample.value):
                key = names[sample.name]
                found[key] = found.get(key, 0.0) + sample.value
            elif sample.name == SPEC_PER_POSITION and str(sample.labels.get("position", "")).isdigit():
                pos = int(sample.labels["position"])
                found["per_position"][pos] = found["per_position"].get(pos, 0.0) + sample.value
    return found if "drafts" in found else {}


def spec_decode_fields(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """vLLM's spec_decode_* result fields from two counter readings; {} when nothing was drafted."""
    if not after:
        return {}
    drafts = after["drafts"] - before.get("drafts", 0.0)
    draft_tokens = after.get("draft_tokens", 0.0) - before.get("draft_tokens", 0.0)
    accepted = after.get("accepted", 0.0) - before.get("accepted", 0.0)
    if drafts <= 0:
        return {}
    positions = sorted(after["per_position"])
    then = before.get("per_position", {})
    return {
        "spec_decode_acceptance_rate": accepted / draft_tokens * 100 if draft_tokens > 0 else 0.0,
        "spec_decode_acceptance_length": 1 + accepted / drafts,
        "spec_decode_num_drafts": int(drafts),
        "spec_decode_draft_tokens": int(draft_tokens),
        "spec_decode_accepted_tokens": int(accepted),
        "spec_decode_per_position_acceptance_rates": [
            (after["per_position"][p] - then.get(p, 0.0)) / drafts for p in positions
        ],
    }
