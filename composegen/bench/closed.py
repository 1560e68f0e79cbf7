"""Load benchmark: a closed-loop concurrency sweep over streamed chat completions (figures:
stats.py).

`run_sweep(base_url, model, levels, BenchSpec(input_tokens, output_tokens, …), *, api_key=None,
gpus=None) -> BenchRun`; `run_bench(base_url, model, levels, **BenchSpec's fields)` for its
BenchResult alone.

Prompts are sized with the server's own /tokenize (the chat `messages` form) to exactly
`input_tokens`, on any tokenizer (prompts.py: filler words, then single-token pad pieces). Each
prompt starts with its own index, so no two prompts share more than the chat template's prefix and
prefix caching cannot serve one request from another's work; every level gets fresh prompts (with
--duration a pool of them, reused in turn: `distinct_prompts` says how many). Requests ask for
`output_tokens` with `ignore_eos` (vLLM's extension), temperature 0, stream_options.include_usage;
token counts come from the API's usage, and a request whose usage shows fewer output tokens than
asked is counted (`short_outputs`): the run is then not ok. Before the sweep one request (not
counted) checks the endpoint and warms it.

Besides composegen's figures, every level is kept in `vllm bench serve`'s own result shape
(vllmresult.py; `run_sweep(...).vllm_results`), with the spec_decode_* counters read off /metrics.

Closed loop: `concurrency` workers each send a request, wait for its stream to end, and send the
next, until the level's requests are sent (or its duration is over: requests in flight still
finish). The client is asyncio with one connection per worker (stream.py parses each stream as it
arrives): it must never be the bottleneck (bench/bench_client.py measures it; docs/benchmarks.md has
the figures).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from composegen import safewrite
from composegen.bench import frontier, stream, vllmresult
from composegen.bench.prompts import Messages, Prompts, Tokenizer
from composegen.bench.reports import BenchResult, VllmBenchServeResult
from composegen.bench.spec import BenchSpec
from composegen.bench.stats import Sample, spec_level, spread
from composegen.bench.stream import ChatRequest
from composegen.errors import BadInput, EngineError
from composegen.profiles.resolved import Resolved
from composegen.project import Project
from composegen.stack import driver

if TYPE_CHECKING:
    import httpx

DURATION_POOL = 128  # distinct prompts per level with --duration (then reused in turn)
_PATH = "/v1/chat/completions"


def metrics_client(base_url: str, api_key: str | None, timeout: float) -> httpx.AsyncClient:
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    headers["Accept-Encoding"] = "identity"  # the stream cap counts the bytes that arrive
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    return httpx.AsyncClient(
        base_url=base_url.rstrip("/").removesuffix("/v1"),
        headers=headers,
        limits=limits,
        timeout=httpx.Timeout(timeout, connect=30),
    )


async def _level(
    connect: Callable[[], stream.StreamClient],
    bodies: list[tuple[ChatRequest, int]],
    concurrency: int,
    requests: int | None,
    duration: float | None,
) -> tuple[list[Sample], float, float, float]:
    """(samples, seconds, client CPU seconds, its start) of one closed-loop level. Each worker has a connection
    of its own (stream.StreamClient: the events of a stream are parsed as they arrive, in the
    loop's data callback; a pool scanning connections per request cost more CPU than the requests
    themselves)."""
    samples: list[Sample] = []
    sent = 0
    clients = [connect() for _ in range(concurrency)]
    started = time.perf_counter()
    deadline = started + duration if duration is not None else math.inf
    cpu = time.process_time()

    async def worker(client: stream.StreamClient) -> None:
        nonlocal sent
        while (sent < requests) if requests is not None else (time.perf_counter() < deadline):
            body, tokens = bodies[sent % len(bodies)]
            sent += 1
            samples.append(await client.stream(_PATH, body, tokens))

    try:
        await asyncio.gather(*(worker(client) for client in clients))
        return samples, time.perf_counter() - started, time.process_time() - cpu, started
    finally:
        for client in clients:
            client.close()


def chat_body(model: str, messages: Messages, output_tokens: int) -> ChatRequest:
    return ChatRequest(
        model=model,
        messages=messages,
        max_tokens=output_tokens,
        ignore_eos=True,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )


@dataclass(frozen=True)
class BenchRun:
    result: BenchResult
    vllm_results: list[VllmBenchServeResult]  # per level, `vllm bench serve`'s result shape


def run_bench(
    base_url: str,
    model: str,
    levels: Iterable[int],
    *,
    api_key: str | None = None,
    gpus: int | None = None,
    **options: Any,
) -> BenchResult:
    """run_sweep's composegen figures only; `options`: BenchSpec's fields."""
    return run_sweep(
        base_url, model, levels, BenchSpec(**options), api_key=api_key, gpus=gpus
    ).result


def run_sweep(
    base_url: str,
    model: str,
    levels: Iterable[int],
    options: BenchSpec,
    *,
    api_key: str | None = None,
    gpus: int | None = None,
) -> BenchRun:
    o = dataclasses.replace(options, levels=tuple(levels), gpus=gpus).check().seeded()
    assert o.seed is not None  # seeded
    prompts = Prompts(Tokenizer(base_url, model, api_key, o.timeout).count, o.input_tokens, o.seed)
    per_level = o.requests if o.requests is not None else max(DURATION_POOL, 4 * max(o.levels))
    warmup = chat_body(model, prompts.make(0)[0], o.output_tokens)
    plans = []
    for n, concurrency in enumerate(o.levels):
        made = prompts.make_many([1 + n * per_level + i for i in range(per_level)])
        plans.append(
            (
                concurrency,
                [(chat_body(model, msgs, o.output_tokens), tokens) for msgs, tokens in made],
            )
        )
    swept = run_loop(_sweep(base_url, api_key, warmup, plans, o, model))
    results = [frontier.with_frontier(level, gpus) for level, _ in swept]
    return BenchRun(o.result(model, results), [shaped for _, shaped in swept])


def run_loop(coro: Any) -> Any:
    """Run the sweep on uvloop when it is installed: its event loop wakes up for a streamed event at
    about half the CPU of asyncio's own (bench/bench_client.py --paced, docs/benchmarks.md)."""
    try:
        import uvloop  # lazy: only bench runs an event loop
    except ImportError:
        return asyncio.run(coro)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro)


async def read_metrics(client: httpx.AsyncClient) -> str | None:
    """The server's /metrics text (None when it does not answer, or says too much)."""
    import httpx

    try:
        async with client.stream("GET", "/metrics") as resp:
            if resp.status_code != 200:
                return None
            body = b""
            async for piece in resp.aiter_bytes():
                body += piece
                if len(body) > vllmresult.METRICS_CAP:
                    return None
        return body.decode("utf-8", "replace")
    except httpx.HTTPError:
        return None


def spec_of(text: str | None) -> vllmresult.SpecCounters | None:
    try:
        return vllmresult.spec_counters(text) if text is not None else None
    except ValueError:
        return None


async def warmed(
    base_url: str, api_key: str | None, timeout: float, warmup: ChatRequest
) -> Callable[[], stream.StreamClient]:
    """A connector to the server, after one uncounted warm-up request through it."""
    connect = functools.partial(stream.StreamClient, base_url, api_key, timeout)
    warm = connect()
    first = await warm.stream(_PATH, warmup, 0)
    warm.close()
    if first.error:
        raise EngineError(f"bench: {base_url}{_PATH}: the warm-up request failed: {first.error}")
    return connect


async def _sweep(
    base_url: str,
    api_key: str | None,
    warmup: ChatRequest,
    plans: list[tuple[int, list[tuple[ChatRequest, int]]]],
    o: BenchSpec,
    model: str,
) -> list[tuple[Any, Any]]:
    """[(LevelResult, VllmBenchServeResult)] per level, after one uncounted warm-up request."""
    results = []
    connect = await warmed(base_url, api_key, o.timeout, warmup)
    # /metrics, before and after each level
    async with metrics_client(base_url, api_key, o.timeout) as client:
        for concurrency, bodies in plans:
            before, when = await read_metrics(client), time.time()
            samples, seconds, cpu, started = await _level(
                connect, bodies, concurrency, o.requests, o.duration
            )
            after = await read_metrics(client)
            spec = vllmresult.spec_decode_fields(spec_of(before), spec_of(after))
            level = spec_level(o, concurrency, samples, seconds, cpu, len(bodies))
            # with --requests every request is due at the level's start: the wait for a slot
            queue = spread(
                [s.started - started for s in samples] if o.requests else [], "client_queue"
            )
            level = level.model_copy(update=vllmresult.server_times(before, after) | queue)
            shaped = vllmresult.level_result(
                model,
                concurrency,
                samples,
                seconds,
                goodput=level.request_goodput,
                spec_decode=spec,
                when=when,
            )
            results.append((level, shaped))
    return results


def bench_stack(
    project: Project, r: Resolved, levels: Iterable[int], options: BenchSpec
) -> BenchRun:
    """run_sweep against the profile's running stack (its endpoint found as gate and ladder find
    it; whether it is emulated, from the running container)."""
    base_url, served, api_key, emulated = stack_target(project, r)
    options = dataclasses.replace(options, emulated=emulated)
    return run_sweep(base_url, served, levels, options, api_key=api_key, gpus=gpus_of(r))


def gpus_of(r: Resolved) -> int:
    """GPUs the engine spreads over: tensor × pipeline × data parallel."""
    sizes = ("tensor-parallel-size", "pipeline-parallel-size", "data-parallel-size")
    n = 1
    for flag in sizes:
        value = r.flags.get(flag, 1)
        n *= value if isinstance(value, int) and value > 0 else 1
    return n


def stack_target(project: Project, r: Resolved) -> tuple[str, str, str | None, bool | None]:
    """(base URL, served model name, API key, emulated) of the profile's running stack."""
    ctr = driver.running_container(project, r)
    ep = driver.endpoint(r)
    return ep.base_url, r.profile.model.served_name, ep.api_key, driver.live_identity(ctr).emulated


def check_results_dir(directory: Path) -> None:
    """BadInput before the sweep when --save-vllm-results names a link or something other than a
    directory."""
    if directory.is_symlink() or (directory.exists() and not directory.is_dir()):
        raise BadInput(f"--save-vllm-results {directory}: not a directory (links are not followed)")


def _result_name(shaped: VllmBenchServeResult, taken: list[Path]) -> str:
    """`vllm-bench-serve-cN.json` (closed loop), `…-rRATE.json` (open loop), `-2`, `-3` … for a
    rate run again (bench --find-max's repeats)."""
    if shaped.max_concurrency is not None:
        return f"vllm-bench-serve-c{shaped.max_concurrency}.json"
    rate = (
        shaped.request_rate if isinstance(shaped.request_rate, str) else f"{shaped.request_rate:g}"
    )
    stem, n = f"vllm-bench-serve-r{rate}", 1
    names = {p.name for p in taken}
    while (name := f"{stem}{f'-{n}' if n > 1 else ''}.json") in names:
        n += 1
    return name


def save_vllm_results(run: BenchRun, directory: Path) -> list[Path]:
    """One `vllm-bench-serve-cN.json` per level in `directory` (created if missing): vLLM's result
    shape. Each file is written beside itself and renamed into place; a directory that is a link, or
    a name held by something other than a regular file, is refused."""
    check_results_dir(directory)
    directory.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for shaped in run.vllm_results:
        path = directory / _result_name(shaped, written)
        if path.is_symlink() or (path.exists() and not path.is_file()):
            raise BadInput(f"--save-vllm-results: {path} exists and is not a regular file")
        safewrite.write(path, json.dumps(shaped.to_json()))
        written.append(path)
    return written
