"""`bench --find-max`: the highest request rate whose open-loop levels meet the SLOs (MLPerf
server style), by bisection between two bounds within a budget of probed rates.

The lower bound is probed first (failing there, there is no answer), then the upper one (passing
there, the answer is "at least the upper bound"), then the geometric middle of the interval still
open, until the budget is spent: the answer is the highest passing rate, `first_failing_rate` the
lowest failing one, so the truth lies between them. Each probe runs `repeats` levels (fresh prompts
and schedule seeds) and passes only when all of them do; the spread of the SLO figures between the
repeats at the answer says how much to trust it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from composegen.bench import slo
from composegen.bench.reports import FindMax, FindMaxProbe, LevelResult
from composegen.errors import BadInput

Probe = Callable[[float], list[LevelResult]]  # run one rate `repeats` times


def check(rates: list[float], limits: dict[str, float] | None, max_levels: int) -> None:
    if not limits:
        msg = "bench --find-max: give the SLOs to meet, e.g. --slo ttft_p99=500,tpot_p99=50"
        raise BadInput(msg)
    if len(rates) != 2 or not 0 < rates[0] < rates[1] or math.isinf(rates[1]):
        raise BadInput(
            "bench --find-max: --request-rate LOW,HIGH: the search's bounds, two finite rates, "
            f"low < high (got {rates})"
        )
    if max_levels < 2:
        raise BadInput(f"bench --find-max: --max-levels must be ≥ 2 (the bounds), got {max_levels}")


def _spread(levels: list[LevelResult], limits: dict[str, float]) -> dict[str, float]:
    spread: dict[str, float] = {}
    if len(levels) < 2:
        return spread  # one repeat has no spread
    for name in [*limits, "achieved_request_rate"]:
        if name == "achieved_request_rate":
            values = [lv.achieved_request_rate for lv in levels]
        else:
            values = [slo.figure(lv, name) for lv in levels]
        known = [v for v in values if v is not None]
        if known:
            spread[name] = round(max(known) - min(known), 3)
    return spread


def _bisect(
    passes: Callable[[float], bool], low: float, high: float, more: Callable[[], bool]
) -> tuple[float | None, float | None]:
    """(best rate that passed, first that failed): the bounds first, then geometric midpoints while
    `more()` allows another probe."""
    if not passes(low):
        return None, low
    if passes(high):
        return high, None
    best, failing = low, high
    while more():
        middle = round(math.sqrt(best * failing), 3)
        if not best < middle < failing:
            break
        if passes(middle):
            best = middle
        else:
            failing = middle
    return best, failing


def search(
    probe: Probe,
    limits: dict[str, float],
    low: float,
    high: float,
    max_levels: int,
    requests: int | None,
    repeats: int,
) -> tuple[FindMax, list[LevelResult]]:
    probes: list[FindMaxProbe] = []
    runs: dict[float, list[LevelResult]] = {}

    def passes(rate: float) -> bool:
        levels = probe(rate)
        runs[rate] = levels
        broken = [f for lv in levels for f in slo.failures(lv, limits)]
        probes.append(
            FindMaxProbe(
                request_rate=rate,
                passed=not broken,
                requests=min((lv.completed + lv.errors for lv in levels), default=0),
                repeats=len(levels),
                failures=broken,
            )
        )
        return not broken

    best, failing = _bisect(passes, low, high, lambda: len(probes) < max_levels)
    found = FindMax(
        slos=limits,
        low=low,
        high=high,
        max_levels=max_levels,
        best_rate=best,
        first_failing_rate=failing,
        requests_per_level=requests,
        repeats=repeats,
        spread=_spread(runs[best], limits) if best is not None else {},
        probes=probes,
    )
    return found, [lv for rate_levels in runs.values() for lv in rate_levels]
