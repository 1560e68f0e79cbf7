"""Service-level objectives on whole levels (`bench --slo ttft_p99=500,tpot_p99=50`): a level
passes when every named figure (a level's `<stat>_<metric>_ms`) is within its limit and no request
failed — MLPerf server's question, "does this load keep p99 TTFT and TPOT under their limits?".
(`--goodput` is vLLM's per-request count; this is per level.)
"""

from __future__ import annotations

from composegen.bench.reports import LevelResult
from composegen.bench.stats import METRICS, parse_limits

STATS = ("mean", "median", "p90", "p99")
NAMES = tuple(f"{metric}_{stat}" for metric in METRICS for stat in STATS)


def parse(text: str | None) -> dict[str, float] | None:
    """`ttft_p99=500,tpot_p99=50[,e2el_p99=…]` (milliseconds) -> {name: limit}."""
    if not text:
        return None
    return parse_limits(
        [part for part in text.replace(" ", ",").split(",") if part],
        "=",
        NAMES,
        "--slo: {}: expected NAME=MILLISECONDS, NAME one of ttft_p99, tpot_p99, e2el_p99 "
        "(or <ttft|tpot|itl|e2el>_<mean|median|p90|p99>)",
    )


def figure(level: LevelResult, name: str) -> float | None:
    metric, _, stat = name.partition("_")
    value = getattr(level, f"{stat}_{metric}_ms")
    return value if isinstance(value, float | int) else None


def failures(level: LevelResult, limits: dict[str, float]) -> list[str]:
    """What this level broke: `ttft_p99 812.4 > 500` per limit, and failed or missing requests."""
    broken = []
    if level.errors or not level.completed:
        broken.append(f"{level.errors} failed request(s), {level.completed} completed")
    for name, limit in limits.items():
        value = figure(level, name)
        if value is None or value > limit:
            shown = "none" if value is None else f"{value:g}"
            broken.append(f"{name} {shown} > {limit:g}")
    return broken


def judged(level: LevelResult, limits: dict[str, float] | None) -> LevelResult:
    if not limits:
        return level
    broken = failures(level, limits)
    return level.model_copy(update={"slo_met": not broken, "slo_failures": broken})
