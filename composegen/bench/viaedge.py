"""`bench NAME --via-edge`: what a client sees through the edge, beside the operator door, in one run.

`run_via_edge(door, edge, levels, BenchSpec(input_tokens, output_tokens, …)) -> BenchResult`:
the options a plain sweep takes, one object for both.

Prompts are sized through the door as `bench` sizes them (/tokenize is never on the public
listener). Each level is bench's closed loop with one difference: request n goes through the door
when n is even, through the edge when odd, so both paths run under the same load at the same moment
and a drift of the machine (another tenant, a CPU's clock) falls on both alike; at concurrency 1 the
requests strictly alternate. Every request has a prompt of its own: a prompt sent down both paths
would be served from the prefix cache the second time. `--requests N` is N per path.

The edge's requests ask for its alias (the gatekeeper rewrites it to the stack's served name) with a
client key over TLS verified by the caller's context; the door's ask for the served name in plain
HTTP. The result is a BenchResult whose levels are the edge's (what clients see) and whose
`via_edge` holds both paths and the differences (reports.py). Who makes and removes the key
is the caller's business (edge/benchvia.py): this module never sees where keys live.
"""

from __future__ import annotations

import asyncio
import dataclasses
import ssl
import time
from collections.abc import Iterable
from dataclasses import dataclass

from composegen.bench import closed, stream
from composegen.bench.prompts import Messages, Prompts, Tokenizer
from composegen.bench.reports import BenchResult, EdgeLevel, LevelResult, PathFigures, ViaEdgeResult
from composegen.bench.spec import BenchSpec, good
from composegen.bench.stats import Sample, spec_level
from composegen.errors import EngineError

PATHS = ("door", "edge")
ALTERNATED = "request n through the door when n is even, through the edge when odd; a prompt each"
_CHAT = "/v1/chat/completions"


@dataclass(frozen=True)
class Way:
    """One way into the stack: where, which model name, with which key and TLS verification."""

    url: str
    model: str
    api_key: str | None
    context: ssl.SSLContext | None = None


@dataclass(frozen=True)
class EdgeWay(Way):
    name: str = ""  # the edge's name
    tls: str = ""  # how its certificate is verified, in words


Plan = list[tuple[Messages, int]]


async def _warm(way: Way, messages: Messages, timeout: float) -> None:
    """One request (not counted) on a path: the endpoint answers, and the connection is warm."""
    client = stream.StreamClient(way.url, way.api_key, timeout, way.context)
    try:
        got = await client.stream(_CHAT, closed.chat_body(way.model, messages, 1), 0)
    finally:
        client.close()
    if got.error:
        raise EngineError(f"bench --via-edge: {way.url}{_CHAT}: the warm-up failed: {got.error}")


async def _level(
    ways: dict[str, Way],
    plan: Plan,
    output_tokens: int,
    concurrency: int,
    requests: int | None,
    duration: float | None,
    timeout: float,
) -> tuple[dict[str, list[Sample]], float, float]:
    """({path: samples}, seconds, client CPU seconds) of one alternated closed-loop level."""
    samples: dict[str, list[Sample]] = {path: [] for path in PATHS}
    total = 2 * requests if requests is not None else None
    sent = 0
    workers = [
        {p: stream.StreamClient(w.url, w.api_key, timeout, w.context) for p, w in ways.items()}
        for _ in range(concurrency)
    ]
    started, cpu = time.perf_counter(), time.process_time()
    deadline = started + duration if duration is not None else float("inf")

    def more() -> bool:  # --requests: N per path in all; --duration: until it ends
        return sent < total if total is not None else time.perf_counter() < deadline

    async def worker(clients: dict[str, stream.StreamClient]) -> None:
        nonlocal sent
        while more():
            n, path = sent, PATHS[sent % 2]
            sent += 1
            messages, tokens = plan[n % len(plan)]
            body = closed.chat_body(ways[path].model, messages, output_tokens)
            samples[path].append(await clients[path].stream(_CHAT, body, tokens))

    try:
        await asyncio.gather(*(worker(clients) for clients in workers))
        return samples, time.perf_counter() - started, time.process_time() - cpu
    finally:
        for clients in workers:
            for client in clients.values():
                client.close()


def _figures(level: LevelResult) -> PathFigures:
    """The level's figures PathFigures names (its fields are a subset of LevelResult's)."""
    return PathFigures.model_validate(level.model_dump(include=set(PathFigures.model_fields)))


def _added(edge: float | None, door: float | None) -> float | None:
    return None if edge is None or door is None else round(edge - door, 4)


def edge_level(concurrency: int, door: LevelResult, edge: LevelResult) -> EdgeLevel:
    return EdgeLevel(
        concurrency=concurrency,
        door=_figures(door),
        edge=_figures(edge),
        added_ttft_p50_ms=_added(edge.median_ttft_ms, door.median_ttft_ms),
        added_ttft_p99_ms=_added(edge.p99_ttft_ms, door.p99_ttft_ms),
        added_itl_p50_ms=_added(edge.median_itl_ms, door.median_itl_ms),
        added_itl_p99_ms=_added(edge.p99_itl_ms, door.p99_itl_ms),
        added_e2el_p50_ms=_added(edge.median_e2el_ms, door.median_e2el_ms),
        added_e2el_p99_ms=_added(edge.p99_e2el_ms, door.p99_e2el_ms),
    )


async def _sweep(
    ways: dict[str, Way], warmup: Messages, plans: list[tuple[int, Plan]], o: BenchSpec
) -> list[tuple[LevelResult, LevelResult]]:
    """(door, edge) LevelResults per level, after one uncounted warm-up request on each path."""
    for way in ways.values():
        await _warm(way, warmup, o.timeout)
    results = []
    for concurrency, plan in plans:
        got, seconds, cpu = await _level(
            ways, plan, o.output_tokens, concurrency, o.requests, o.duration, o.timeout
        )
        sent = sum(len(s) for s in got.values()) or 1
        per_path = [  # the client's CPU, shared by request count
            spec_level(o, concurrency, got[path], seconds, cpu * len(got[path]) / sent, len(plan))
            for path in PATHS
        ]
        results.append((per_path[0], per_path[1]))
    return results


def run_via_edge(
    door: Way, edge: EdgeWay, levels: Iterable[int], options: BenchSpec
) -> BenchResult:
    o = dataclasses.replace(options, levels=tuple(levels)).check().seeded()
    assert o.seed is not None  # seeded
    count = Tokenizer(door.url, door.model, door.api_key, o.timeout).count
    prompts = Prompts(count, o.input_tokens, o.seed)
    # per path, so twice as many prompts per level
    per_level = 2 * (
        o.requests if o.requests is not None else max(closed.DURATION_POOL, 4 * max(o.levels))
    )
    plans = [
        (c, prompts.make_many([1 + n * per_level + i for i in range(per_level)]))
        for n, c in enumerate(o.levels)
    ]
    ways: dict[str, Way] = {"door": door, "edge": edge}
    swept = closed.run_loop(_sweep(ways, prompts.make(0)[0], plans, o))
    via = ViaEdgeResult(
        edge=edge.name,
        url=edge.url,
        alias=edge.model,
        tls=edge.tls,
        door_url=door.url,
        alternated=ALTERNATED,
        emulated=o.emulated,
        levels=[edge_level(d.concurrency, d, e) for d, e in swept],
    )
    both = [lv for pair in swept for lv in pair]
    return o.result(
        edge.model,
        [e for _, e in swept],
        input_tokens_exact=not any(lv.input_tokens_off for lv in both),
        ok=all(map(good, both)),
        gpus=None,
        via_edge=via,
    )
