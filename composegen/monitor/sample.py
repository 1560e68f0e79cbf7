"""One `top` sample from two scrapes of vLLM's /metrics: gauges now, rates and percentiles over the
window.

Counter rates and latency percentiles come from the difference of two scrapes (a counter that went
down means the engine restarted: its new value is the delta, as in Prometheus' rate()). Percentiles
are Prometheus' histogram_quantile over the bucket deltas: linear inside the bucket that holds the
rank, and the largest finite bound when the rank falls into +Inf. Several engines (data parallel:
one `engine` label each) are summed; KV usage is their mean."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from composegen.monitor.reports import Latency, SpecDecode, TopSample

Labels = frozenset[tuple[str, str]]


@dataclass
class Scrape:
    """Samples of one /metrics text by sample name, then by label set; `at` is time.monotonic()."""

    at: float
    samples: dict[str, dict[Labels, float]] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str, at: float) -> Scrape:
        """Raises ValueError when `text` is not Prometheus exposition text."""
        # why: `schema --report top` loads this
        from prometheus_client.parser import text_string_to_metric_families

        scrape = cls(at)
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                # NaN/Inf figures would make the report invalid JSON: no value
                if math.isfinite(s.value):
                    labels = frozenset(s.labels.items())
                    scrape.samples.setdefault(s.name, {})[labels] = float(s.value)
        return scrape

    def values(self, name: str, **match: str) -> list[tuple[Labels, float]]:
        wanted = set(match.items())
        return [(labels, v) for labels, v in self.samples.get(name, {}).items() if wanted <= labels]

    def total(self, name: str, **match: str) -> float | None:
        found = self.values(name, **match)
        return sum(v for _, v in found) if found else None

    def mean(self, name: str) -> float | None:
        found = self.values(name)
        return sum(v for _, v in found) / len(found) if found else None


def delta(before: Scrape | None, after: Scrape, name: str, **match: str) -> float | None:
    """A counter's increase between two scrapes, summed over label sets (None: no such series)."""
    now = after.values(name, **match)
    if not now:
        return None
    then = dict(before.values(name, **match)) if before else {}
    total = 0.0
    for labels, value in now:
        old = then.get(labels, 0.0)
        total += value - old if value >= old else value
    return total


def bucket_deltas(
    before: Scrape | None, after: Scrape, histogram: str
) -> list[tuple[float, float]]:
    """(upper bound, cumulative count) over the window, summed across engines, by bound."""
    name = f"{histogram}_bucket"
    then = dict(before.values(name)) if before else {}
    by_le: dict[float, float] = {}
    for labels, value in after.values(name):
        bound = _number(dict(labels).get("le"))  # float("+Inf") is inf
        if bound is None:
            continue  # no bound: not a line a histogram can have
        old = then.get(labels, 0.0)
        by_le[bound] = by_le.get(bound, 0.0) + (value - old if value >= old else value)
    return sorted(by_le.items())


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def quantile(q: float, buckets: list[tuple[float, float]]) -> float | None:
    """Prometheus' histogram_quantile over cumulative (bound, count); None without data."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    lower, below = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if math.isinf(bound):
                return lower  # the largest finite bound
            if count == below:
                return bound
            return lower + (bound - lower) * (rank - below) / (count - below)
        lower, below = bound, count
    return lower


def _latency(before: Scrape | None, after: Scrape, histogram: str) -> Latency:
    buckets = bucket_deltas(before, after, histogram)
    count = buckets[-1][1] if buckets else 0
    return Latency(p50_s=quantile(0.5, buckets), p95_s=quantile(0.95, buckets), count=count)


def _ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den else None


def _spec(before: Scrape | None, after: Scrape) -> SpecDecode | None:
    drafts = delta(before, after, "vllm:spec_decode_num_drafts_total")
    if drafts is None:
        return None
    drafted = delta(before, after, "vllm:spec_decode_num_draft_tokens_total") or 0.0
    accepted = delta(before, after, "vllm:spec_decode_num_accepted_tokens_total") or 0.0
    per_position = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
    named = {dict(labels).get("position", "") for labels, _ in after.values(per_position)}
    positions = sorted((p for p in named if p.isdigit()), key=int)
    per_pos = [_ratio(delta(before, after, per_position, position=p), drafts) for p in positions]
    return SpecDecode(
        drafts=drafts,
        draft_tokens=drafted,
        accepted_tokens=accepted,
        acceptance_rate=_ratio(accepted, drafted),
        mean_acceptance_length=1 + accepted / drafts if drafts else None,
        per_position=per_pos,
    )


def compute(
    before: Scrape | None, after: Scrape, *, url: str, name: str | None = None, view: str = "single"
) -> TopSample:
    """The sample for the window `before`..`after` (before=None: since the engine started)."""
    window = after.at - before.at if before else 0.0

    def rate(counter: str) -> float | None:
        d = delta(before, after, counter)
        return d / window if d is not None and window > 0 else None

    hits = delta(before, after, "vllm:prefix_cache_hits_total")
    queries = delta(before, after, "vllm:prefix_cache_queries_total")

    return TopSample(
        name=name,
        url=url,
        view=view,
        window_s=round(window, 3),
        running=after.total("vllm:num_requests_running"),
        waiting=after.total("vllm:num_requests_waiting"),
        kv_cache_usage=after.mean("vllm:kv_cache_usage_perc"),
        prefix_cache_hit_rate=_ratio(hits, queries),
        prompt_tokens_per_s=rate("vllm:prompt_tokens_total"),
        generation_tokens_per_s=rate("vllm:generation_tokens_total"),
        requests_finished=delta(before, after, "vllm:request_success_total"),
        ttft=_latency(before, after, "vllm:time_to_first_token_seconds"),
        e2e=_latency(before, after, "vllm:e2e_request_latency_seconds"),
        preemptions=delta(before, after, "vllm:num_preemptions_total"),
        preemptions_total=after.total("vllm:num_preemptions_total"),
        spec_decode=_spec(before, after),
    )
