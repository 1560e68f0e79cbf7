"""The throughput–interactivity frontier (InferenceMAX style): every bench level is a point
(output tokens/s per GPU, tokens/s per user), so two configurations compare at any operating point,
not only at one chosen load.

Per user is 1000 / median TPOT (ms): the decode speed one request sees. A point is on the Pareto
front when no other point of the same series is at least as good on both axes and better on one.
"""

from __future__ import annotations

import itertools
import math

from composegen.bench.reports import LevelResult


def with_frontier(level: LevelResult, gpus: int | None) -> LevelResult:
    """The level with its frontier pair (output_throughput_per_gpu, tokens_per_s_per_user)."""
    tpot = level.median_tpot_ms
    per_gpu = round(level.output_throughput / max(gpus or 1, 1), 3)
    per_user = round(1000 / tpot, 3) if tpot else None
    return level.model_copy(
        update={"output_throughput_per_gpu": per_gpu, "tokens_per_s_per_user": per_user}
    )


def pareto(points: list[tuple[float, float]]) -> list[bool]:
    """For each (x, y), higher being better on both: is it on the front (no other point at least as
    good on both axes)? O(n log n): by x descending, a point is dominated when a point of greater x
    reaches its y, or one of equal x exceeds it. A NaN coordinate compares false: never dominated."""
    best = -math.inf  # the highest y among points of greater x
    front = [True] * len(points)
    order = sorted(
        (i for i, p in enumerate(points) if not (math.isnan(p[0]) or math.isnan(p[1]))),
        key=lambda i: -points[i][0],
    )
    for _, group in itertools.groupby(order, key=lambda i: points[i][0]):
        same_x = list(group)
        top = max(points[i][1] for i in same_x)
        for i in same_x:
            front[i] = not (best >= points[i][1] or top > points[i][1])
        best = max(best, top)
    return front


def points(levels: list[LevelResult]) -> list[tuple[float, float]]:
    """The (per GPU, per user) pairs of the levels that have both."""
    return [
        (lv.output_throughput_per_gpu, lv.tokens_per_s_per_user)
        for lv in levels
        if lv.output_throughput_per_gpu is not None and lv.tokens_per_s_per_user is not None
    ]
