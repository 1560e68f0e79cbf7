"""Open-loop sweeps: `bench --request-rate R1,R2,…` — one level per rate, requests sent on vLLM's
arrival schedule (schedule.py) by openloop.py, with every figure a closed-loop level has, the
open loop's own (lateness, achieved rate, queueing), the frontier pair (frontier.py) and, with
--slo, whether the level met it (slo.py). Prompts and warm-up as closed.py makes them.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

from composegen.bench import findmax, frontier, openloop, schedule, slo, vllmresult
from composegen.bench.closed import (
    DURATION_POOL,
    BenchRun,
    chat_body,
    metrics_client,
    read_metrics,
    run_loop,
    spec_of,
    warmed,
)
from composegen.bench.prompts import Prompts, Tokenizer
from composegen.bench.reports import LevelResult, VllmBenchServeResult
from composegen.bench.schedule import INF
from composegen.bench.slo import judged
from composegen.bench.spec import BenchSpec, check_search
from composegen.bench.stats import spec_level
from composegen.bench.stream import ChatRequest

PROMPT_STRIDE = 100_000  # prompt indices per level: no two levels (or probes) share a prompt
_PATH = "/v1/chat/completions"


@dataclass(frozen=True)
class _Plan:
    rate: float
    seed: int
    bodies: list[tuple[ChatRequest, int]]
    offsets: list[float]


def run_rates(
    base_url: str, model: str, rates: list[float], options: BenchSpec, *, first_level: int = 0
) -> BenchRun:
    """One open-loop level per rate. `first_level` numbers the levels (prompts and schedule seeds)
    so repeated runs of one search never reuse a prompt or a schedule."""
    o = dataclasses.replace(options, rates=tuple(rates)).check().seeded()
    assert o.seed is not None  # seeded
    prompts = Prompts(
        Tokenizer(base_url, model, o.api_key, o.timeout).count, o.input_tokens, o.seed
    )
    plans = []
    for n, rate in enumerate(rates, start=first_level):
        count = schedule.requests_for(rate, o.requests, o.duration)
        pool = count if o.requests is not None else min(count, DURATION_POOL)
        made = prompts.make_many([1 + n * PROMPT_STRIDE + i for i in range(pool)])
        bodies = [(chat_body(model, msgs, o.output_tokens), tokens) for msgs, tokens in made]
        offsets = schedule.offsets(rate, o.burstiness, count, o.seed + n)
        plans.append(_Plan(rate, o.seed + n, bodies, offsets))
    warmup = chat_body(model, prompts.make(0)[0], o.output_tokens)
    swept = run_loop(_sweep(base_url, model, o, warmup, plans))
    levels = [judged(frontier.with_frontier(level, o.gpus), o.limits) for level, _ in swept]
    result = o.result(model, levels, arrivals="open", slos=o.limits)
    return BenchRun(result, [shaped for _, shaped in swept])


def check_open(
    spec: BenchSpec, rates_text: str, slo_text: str | None, search: int | None
) -> BenchSpec:
    """The spec with its rates and --slo limits, every open-loop argument checked before the stack
    is touched; `search`: --find-max's --max-levels (None: no search)."""
    rates = schedule.parse_rates(rates_text)
    for rate in rates:
        schedule.requests_for(rate, spec.requests, spec.duration)
    schedule.parse_burstiness(spec.burstiness)
    limits = slo.parse(slo_text)
    if search is not None:
        findmax.check(rates, limits, search)
    return dataclasses.replace(spec, rates=tuple(rates), limits=limits).check()


def find_max(
    base_url: str, model: str, bounds: list[float], o: BenchSpec, *, max_levels: int, repeats: int
) -> BenchRun:
    """bench --find-max (findmax.py) on open-loop levels of this run's options."""
    findmax.check(bounds, o.limits, max_levels)
    check_search(repeats, max_levels)
    o = o.seeded()
    shaped: list[VllmBenchServeResult] = []

    def probe(rate: float) -> list[LevelResult]:
        run = run_rates(base_url, model, [rate] * repeats, o, first_level=len(shaped))
        shaped.extend(run.vllm_results)
        return run.result.levels

    assert o.limits is not None  # findmax.check
    found, levels = findmax.search(
        probe, o.limits, bounds[0], bounds[1], max_levels, o.requests, repeats
    )
    result = o.result(model, levels, arrivals="open", slos=o.limits, find_max=found)
    return BenchRun(result, shaped)


async def _sweep(
    base_url: str, model: str, o: BenchSpec, warmup: ChatRequest, plans: list[_Plan]
) -> list[tuple[LevelResult, VllmBenchServeResult]]:
    connect = await warmed(base_url, o.api_key, o.timeout, warmup)
    results = []
    async with metrics_client(base_url, o.api_key, o.timeout) as client:
        for plan in plans:
            before, when = await read_metrics(client), time.time()
            level = await openloop.run_level(connect, plan.bodies, plan.offsets)
            after = await read_metrics(client)
            results.append(_level(model, o, plan, level, before, after, when))
    return results


def _level(
    model: str,
    o: BenchSpec,
    plan: _Plan,
    level: openloop.OpenLevel,
    before: str | None,
    after: str | None,
    when: float,
) -> tuple[LevelResult, VllmBenchServeResult]:
    summary = spec_level(o, 0, level.samples, level.seconds, level.cpu_s, len(plan.bodies))
    extra = openloop.open_fields(level, plan.rate, o.burstiness, plan.seed)
    shaped = vllmresult.level_result(
        model,
        None,
        level.samples,
        level.seconds,
        goodput=summary.request_goodput,
        spec_decode=vllmresult.spec_decode_fields(spec_of(before), spec_of(after)),
        when=when,
        request_rate="inf" if plan.rate == INF else plan.rate,
        burstiness=o.burstiness,
    )
    server = vllmresult.server_times(before, after)
    return summary.model_copy(update=extra | server), shaped
