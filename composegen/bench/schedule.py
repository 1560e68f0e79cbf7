"""Open-loop arrival schedules: when each request of a level is sent, on `vllm bench serve
--request-rate R --burstiness B`'s definition, so a composegen rate means what a vLLM rate means.

Gaps between sends are gamma distributed with shape B and mean 1/R (scale 1/(R·B)): B = 1 is a
Poisson process, B < 1 burstier, B > 1 more even, B = inf a constant 1/R. As vLLM does, the first
send also waits one gap, and the cumulative offsets are rescaled so the last send lands exactly at
N/R: a level of N requests at rate R then takes N/R seconds of sending whatever the seed (the raw
sum is off by a few percent, which would move throughput between seeds). R = inf sends everything
at once. The sampler is the standard library's (random.gammavariate, seeded): composegen does not
depend on numpy; bench/bench_schedule.py compares it with numpy's gamma in vLLM's parameterisation.
"""

from __future__ import annotations

import random

from composegen.bench.spec import INF, MAX_BURSTINESS, MAX_RATE, requests_for
from composegen.errors import BadInput

__all__ = ["INF", "offsets", "parse_burstiness", "parse_rate", "parse_rates", "requests_for"]


def offsets(rate: float, burstiness: float, count: int, seed: int) -> list[float]:
    """Seconds from the level's start at which each of `count` requests is sent."""
    if count < 1:
        return []
    if rate == INF:
        return [0.0] * count
    if burstiness == INF:
        gaps = [1.0 / rate] * count
    else:
        rng = random.Random(seed)
        scale = 1.0 / (rate * burstiness)
        gaps = [rng.gammavariate(burstiness, scale) for _ in range(count)]
    cumulative, at = [], 0.0
    for gap in gaps:
        at += gap
        cumulative.append(at)
    target = count / rate
    factor = target / cumulative[-1] if cumulative[-1] > 0 else 1.0
    return [t * factor for t in cumulative]


BENCH_OPTION = "bench: --request-rate"


def parse_rate(text: str, option: str = BENCH_OPTION) -> float:
    """One rate: requests per second (> 0), or `inf`. OPTION: the caller's, named in the error."""
    word = text.strip().lower()
    if word == "inf":
        return INF
    try:
        rate = float(word)
    except ValueError:
        rate = -1.0
    if not (0 < rate <= MAX_RATE):
        raise BadInput(f"{option}: {text!r}: requests per second in (0, {MAX_RATE:g}], or inf")
    return rate


def parse_rates(text: str, option: str = BENCH_OPTION) -> list[float]:
    """Comma-separated rates; OPTION (`evidence: --bench-rates`, …) is what the errors name."""
    rates = [parse_rate(part, option) for part in text.split(",") if part.strip()]
    if not rates:
        raise BadInput(f"{option}: give at least one rate, e.g. 2,4,8")
    return rates


def parse_burstiness(value: float) -> float:
    if not (0 < value <= MAX_BURSTINESS or value == INF):
        raise BadInput(
            f"bench: --burstiness: in (0, {MAX_BURSTINESS:g}] or inf (1 is Poisson), got {value:g}"
        )
    return value
