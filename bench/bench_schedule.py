"""Does `composegen bench --request-rate` send on vLLM's schedule, and keep it?

    .venv/bin/python bench/bench_schedule.py [--count 2000] [--seeds 20] [--lateness 50,100,200,400]

1. The schedule: for each (rate, burstiness), composegen's offsets (schedule.offsets, stdlib
   random.gammavariate) against vLLM's sampler reimplemented from its documented behaviour: numpy's
   gamma with shape B and scale 1/(R·B), cumulated, rescaled so the last send is at N/R. Printed: the
   gaps' mean, coefficient of variation and p50/p99, the two-sample Kolmogorov–Smirnov distance
   between the gap distributions (pooled over --seeds seeds) and its 1% critical value, and the
   total sending time (and, unscaled, how far a raw gamma sum strays from N/R between seeds — why
   both rescale).
2. Keeping it (--lateness): first the sender alone (its wait and a task per send, no request: what
   the machine allows), then open-loop levels against bench/instant_server.py (answers at once, in
   its own process), per rate the achieved rate and the send lateness p50/p99/max (actual send minus
   scheduled), the time the client waited on the OS's run queue during the level and the load
   average: where this machine's client stops keeping the schedule, and whether the client or the
   machine is the cause.
Results: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import math
import statistics
import subprocess
import sys
from pathlib import Path

import numpy

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_client import _free_port, _wait  # noqa: E402

from composegen.bench import rates as benchrates  # noqa: E402
from composegen.bench import schedule  # noqa: E402
from composegen.bench.spec import BenchSpec  # noqa: E402

CASES = [(1.0, 1.0), (10.0, 1.0), (10.0, 0.5), (10.0, 4.0), (100.0, 1.0)]


def vllm_offsets(rate: float, burstiness: float, count: int, seed: int) -> list[float]:
    """vLLM's get_request schedule, from its documented behaviour (not its code)."""
    gaps = numpy.random.default_rng(seed).gamma(burstiness, 1.0 / (rate * burstiness), count)
    cumulative = numpy.cumsum(gaps)
    return list(cumulative * (count / rate) / cumulative[-1])


def _gaps(offsets: list[float]) -> list[float]:
    return list(numpy.diff([0.0, *offsets]))


def ks_distance(a: list[float], b: list[float]) -> float:
    sa, sb = numpy.sort(a), numpy.sort(b)
    points = numpy.concatenate([sa, sb])
    cdf_a = numpy.searchsorted(sa, points, side="right") / len(sa)
    cdf_b = numpy.searchsorted(sb, points, side="right") / len(sb)
    return float(numpy.max(numpy.abs(cdf_a - cdf_b)))


def _describe(gaps: list[float]) -> str:
    mean = statistics.fmean(gaps)
    p50, p99 = numpy.percentile(gaps, [50, 99])
    cv = statistics.pstdev(gaps) / mean
    return f"mean {mean * 1000:8.3f} ms  CV {cv:5.3f}  p50 {p50 * 1000:8.3f}  p99 {p99 * 1000:8.3f}"


def schedules(count: int, seeds: int) -> None:
    print(f"== schedules: {count} requests, {seeds} seeds pooled ==")
    for rate, burst in CASES:
        ours, theirs, raw_totals = [], [], []
        for seed in range(seeds):
            ours += _gaps(schedule.offsets(rate, burst, count, seed))
            theirs += _gaps(vllm_offsets(rate, burst, count, seed))
            raw = numpy.random.default_rng(seed).gamma(burst, 1 / (rate * burst), count).sum()
            raw_totals.append(raw / (count / rate) - 1)
        n = len(ours)
        critical = 1.628 * math.sqrt(2 / n)  # two-sample KS, alpha 0.01
        total_ours = schedule.offsets(rate, burst, count, 0)[-1]
        total_theirs = vllm_offsets(rate, burst, count, 0)[-1]
        print(f"R={rate:g} B={burst:g}")
        print(f"  composegen {_describe(ours)}  total {total_ours:.6f} s")
        print(
            f"  vLLM/numpy {_describe(theirs)}  total {total_theirs:.6f} s (N/R {count / rate:g})"
        )
        print(
            f"  KS distance {ks_distance(ours, theirs):.4f} (1% critical {critical:.4f}); "
            f"unscaled raw sums off N/R by {min(raw_totals):+.2%} .. {max(raw_totals):+.2%}"
        )


async def _null_level(offsets: list[float]) -> list[float]:
    """The sender alone (openloop's wait, a task per send, no request): what the machine's
    scheduler allows, apart from any HTTP work."""
    import asyncio
    import time

    from composegen.bench.openloop import _until

    late: list[float] = []

    async def send(due: float) -> None:
        late.append(time.perf_counter() - due)

    started = time.perf_counter()
    tasks = []
    for offset in offsets:
        await _until(started + offset)
        tasks.append(asyncio.create_task(send(started + offset)))
    await asyncio.gather(*tasks)
    return late


def null_lateness(rates: list[float], seconds: float) -> None:
    from composegen.bench.closed import run_loop

    print(f"== lateness of the sender alone (no requests), {seconds:g} s per rate ==")
    for rate in rates:
        offsets = schedule.offsets(rate, 1.0, max(1, round(rate * seconds)), 1)
        load, waited = _load(), _run_queue_s()
        late = numpy.array(run_loop(_null_level(offsets))) * 1000
        waited = _run_queue_s() - waited
        p50, p99 = numpy.percentile(late, [50, 99])
        print(
            f"R={rate:>6g} late p50 {p50:.3f} p99 {p99:.3f} max {late.max():.3f} ms  "
            f"run queue {waited * 1000:.0f} ms  load {load}"
        )


def _run_queue_s() -> float:
    """Seconds this thread has waited on the OS's run queue, runnable but not running (Linux
    schedstat; 0 elsewhere): lateness that no client code can avoid."""
    try:
        with open("/proc/thread-self/schedstat", encoding="ascii") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def _load() -> str:
    try:
        with open("/proc/loadavg", encoding="ascii") as f:
            return f.read().split()[0]
    except OSError:
        return "?"


def lateness(rates: list[float], seconds: float, input_tokens: int) -> None:
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, str(REPO / "bench" / "instant_server.py"), str(port)]
    )
    try:
        _wait(port)
        print(f"== lateness against the instant server, {seconds:g} s per rate ==")
        options = BenchSpec(input_tokens=input_tokens, output_tokens=16, duration=seconds, seed=1)
        for rate in rates:
            load, waited = _load(), _run_queue_s()
            run = benchrates.run_rates(f"http://127.0.0.1:{port}", "instant", [rate], options)
            waited = _run_queue_s() - waited
            lv = run.result.levels[0]
            print(
                f"R={lv.request_rate:>6} sent/s {lv.achieved_request_rate:8.2f} done {lv.completed:5} "
                f"err {lv.errors}  late p50 {lv.send_lateness_p50_ms:.3f} p99 "
                f"{lv.send_lateness_p99_ms:.3f} max {lv.send_lateness_max_ms:.3f} ms  "
                f"client CPU {lv.client_cpu_share:.0%}  run queue {waited * 1000:.0f} ms  "
                f"load {load}"
            )
    finally:
        server.terminate()
        server.wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--lateness", default="", help="rates for the lateness run, e.g. 50,200")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--input-tokens", type=int, default=64, help="prompt size (JSON to encode)")
    args = parser.parse_args()
    schedules(args.count, args.seeds)
    if args.lateness:
        null_lateness(schedule.parse_rates(args.lateness), args.seconds)
        lateness(schedule.parse_rates(args.lateness), args.seconds, args.input_tokens)


if __name__ == "__main__":
    main()
