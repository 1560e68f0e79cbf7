"""One bench level in exactly `vllm bench serve --save-result`'s result shape, so tooling that reads
vLLM's files reads composegen's (`bench --save-vllm-results DIR` writes `vllm-bench-serve-cN.json`
per level).

The reference is vLLM 0.26.0's own files
(tests/data/real-0.26.0-h200-graphs/vllm-bench-serve-c*.json): the same keys in the same order, the
same units (ms, unrounded), vLLM's definitions — TPOT per request with ≥ 2 output tokens, ITL every
gap between streamed events, numpy's linear percentiles and population standard deviation;
`max_output_tokens_per_s` is the most streamed events in one whole second of the run,
`max_concurrent_requests` the most requests active during one whole second (vLLM's buckets).
`request_rate` is "inf" and `burstiness` 1.0 on a closed level, the rate asked (a number, or "inf")
and the burstiness on an open one, whose `max_concurrency` is null (no cap), as vLLM writes them;
`rtfx` 0.0 (no audio), `errors` is absent (vLLM writes it only with --save-detailed). The
`spec_decode_*` fields come from the server's /metrics (`vllm:spec_decode_*_total` counters before
and after the level), present only when it speculates.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, TypedDict

from composegen.bench.reports import VllmBenchServeResult
from composegen.bench.stats import Sample, percentile

SPEC_COUNTERS = {
    "drafts": "vllm:spec_decode_num_drafts_total",
    "draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
    "accepted": "vllm:spec_decode_num_accepted_tokens_total",
}
SPEC_PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
METRICS_CAP = 16 << 20  # bytes of /metrics read at most


def _figures(name: str, seconds: list[float]) -> dict[str, float]:
    """vLLM's mean/median/std/p50/p90/p99 in ms; 0.0 without values (as numpy's over an empty list
    is)."""
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
    """(most streamed events in one second, most requests active in one second), vLLM's whole-second
    buckets counted from the first request's start."""
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
    concurrency: int | None,
    samples: list[Sample],
    duration: float,
    *,
    goodput: float | None = None,
    spec_decode: SpecDecodeFields | None = None,
    when: float | None = None,
    request_rate: float | str = "inf",
    burstiness: float = 1.0,
) -> VllmBenchServeResult:
    """`concurrency` None: an open-loop level without a cap (vLLM writes max_concurrency null);
    `request_rate` a number, or "inf", as vLLM writes it."""
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
            request_rate=request_rate,
            burstiness=burstiness,
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


@dataclass(frozen=True)
class SpecCounters:
    """One /metrics reading of the speculative-decoding counters, summed over engines."""

    drafts: float
    draft_tokens: float = 0.0
    accepted: float = 0.0
    per_position: dict[int, float] = field(default_factory=dict)  # position -> accepted tokens


class SpecDecodeFields(TypedDict):
    """vLLM's spec_decode_* result fields (VllmBenchServeResult), present only when the server
    drafted."""

    spec_decode_acceptance_rate: float
    spec_decode_acceptance_length: float
    spec_decode_num_drafts: int
    spec_decode_draft_tokens: int
    spec_decode_accepted_tokens: int
    spec_decode_per_position_acceptance_rates: list[float]


def spec_counters(text: str) -> SpecCounters | None:
    """The speculative-decoding counters of one /metrics text; None when the server does not
    speculate."""
    # lazy: ~120 ms measured; only a level reads it
    from prometheus_client.parser import text_string_to_metric_families

    found: dict[str, float] = {}
    per_position: dict[int, float] = {}
    names = {v: k for k, v in SPEC_COUNTERS.items()}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in names and math.isfinite(sample.value):
                key = names[sample.name]
                found[key] = found.get(key, 0.0) + sample.value
            elif (
                sample.name == SPEC_PER_POSITION
                and str(sample.labels.get("position", "")).isdigit()
            ):
                pos = int(sample.labels["position"])
                per_position[pos] = per_position.get(pos, 0.0) + sample.value
    if "drafts" not in found:
        return None
    return SpecCounters(
        drafts=found["drafts"],
        draft_tokens=found.get("draft_tokens", 0.0),
        accepted=found.get("accepted", 0.0),
        per_position=per_position,
    )


SERVER_TIMES = {  # LevelResult field -> the server's histogram
    "server_queue_mean_ms": "vllm:request_queue_time_seconds",
    "server_ttft_mean_ms": "vllm:time_to_first_token_seconds",
    "server_e2el_mean_ms": "vllm:e2e_request_latency_seconds",
}


def histograms(text: str) -> dict[str, list[float]]:
    """{name: [sum of seconds, count]} of the SERVER_TIMES histograms the server has, summed over
    engines; ValueError for a text that is not Prometheus'."""
    from prometheus_client.parser import text_string_to_metric_families  # lazy: as spec_counters

    found: dict[str, list[float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name, _, part = sample.name.rpartition("_")
            if name in SERVER_TIMES.values() and part in ("sum", "count"):
                found.setdefault(name, [0.0, 0.0])[part == "count"] += sample.value
    return found


def server_times(before: str | None, after: str | None) -> dict[str, float | None]:
    """The server's queue, TTFT and E2E means (ms) over the requests finished between two /metrics
    readings (LevelResult's server_* fields); None where it has no such histogram."""
    try:
        then, now = histograms(before or ""), histograms(after or "")
    except ValueError:
        then, now = {}, {}
    means: dict[str, float | None] = {}
    for key, name in SERVER_TIMES.items():
        (s0, n0), (s1, n1) = then.get(name, [0.0, 0.0]), now.get(name, [0.0, 0.0])
        means[key] = round((s1 - s0) / (n1 - n0) * 1000, 3) if n1 > n0 else None
    return means


def spec_decode_fields(
    before: SpecCounters | None, after: SpecCounters | None
) -> SpecDecodeFields | None:
    """vLLM's spec_decode_* result fields from two counter readings; None when nothing was
    drafted."""
    if after is None:
        return None
    then = before or SpecCounters(drafts=0.0)
    drafts = after.drafts - then.drafts
    draft_tokens = after.draft_tokens - then.draft_tokens
    accepted = after.accepted - then.accepted
    if drafts <= 0:
        return None
    return SpecDecodeFields(
        spec_decode_acceptance_rate=accepted / draft_tokens * 100 if draft_tokens > 0 else 0.0,
        spec_decode_acceptance_length=1 + accepted / drafts,
        spec_decode_num_drafts=int(drafts),
        spec_decode_draft_tokens=int(draft_tokens),
        spec_decode_accepted_tokens=int(accepted),
        spec_decode_per_position_acceptance_rates=[
            (after.per_position[p] - then.per_position.get(p, 0.0)) / drafts
            for p in sorted(after.per_position)
        ],
    )
