"""How long `report --html` spends on the frontier of a big bundle: the Pareto front of N bench
levels (bench.frontier.pareto, O(n log n)) against the definition checked pairwise (O(n²), what
the report did before issue 49.6), on seeded points shaped as a sweep's are: throughput per GPU
rising while tokens per user fall, so most points are on the front (the pairwise check's worst case).

    .venv/bin/python bench/bench_frontier.py [--levels 30000] [--naive-levels 3000]

Results: docs/bench.md (the frontier).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from composegen.bench.frontier import pareto


def naive(points: list[tuple[float, float]]) -> list[bool]:
    return [not any(q[0] >= p[0] and q[1] >= p[1] and q != p for q in points) for p in points]


def timed(fn, points) -> tuple[float, list[bool]]:
    started = time.perf_counter()
    front = fn(points)
    return time.perf_counter() - started, front


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--levels", type=int, default=30_000)
    parser.add_argument("--naive-levels", type=int, default=3_000)
    args = parser.parse_args()
    rng = random.Random(7)

    def points(n: int) -> list[tuple[float, float]]:
        return [
            (round(i + rng.uniform(0, 3), 3), round(n - i + rng.uniform(0, 3), 3)) for i in range(n)
        ]

    small = points(args.naive_levels)
    t_naive, want = timed(naive, small)
    t_small, got = timed(pareto, small)
    assert got == want, "the sweep and the definition disagree"
    t_big, _ = timed(pareto, points(args.levels))
    scaled = t_naive * (args.levels / args.naive_levels) ** 2
    print(
        f"{args.naive_levels} levels: pairwise {t_naive:.3f} s, sweep {t_small * 1000:.1f} ms (same front)"
    )
    print(
        f"{args.levels} levels: sweep {t_big * 1000:.1f} ms; pairwise ≈ {scaled:.0f} s (scaled n²)"
    )


if __name__ == "__main__":
    main()
