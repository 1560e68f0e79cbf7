"""Load benchmark: a closed-loop concurrency sweep over streamed chat completions (figures: benchstats.py).

`run_bench(base_url, model, levels, *, input_tokens, output_tokens, requests=None, duration=None, seed=None,
api_key=None, slos=None, timeout=600) -> BenchResult`

Prompts are sized with the server's own /tokenize (the chat `messages` form, as the ladder does) to
exactly `input_tokens` where whole filler words allow it, else within the ladder's ±0.5%. Each prompt
starts with its own index, so no two prompts share more than the chat template's prefix and prefix
caching cannot serve one request from another's work; every level gets fresh prompts (with --duration a
pool of them, reused in turn: `distinct_prompts` says how many). Requests ask for `output_tokens` with
`ignore_eos` (vLLM's extension), temperature 0, stream_options.include_usage; token counts come from the
API's usage. Before the sweep one request (not counted) checks the endpoint and warms it.

Closed loop: `concurrency` workers each send a request, wait for its stream to end, and send the next,
until the level's requests are sent (or its duration is over: requests in flight still finish). The
client is asyncio + httpx with one connection per worker, and reads the SSE stream as raw bytes: it must
never be the bottleneck (bench/bench_client.py measures it; docs/bench.md has the figures).
"""

from __future__ import annotations

import asyncio
import functools
import json
import math
import random
import time

from composegen.errors import BadInput, EngineError
from composegen.evidence.benchstats import BenchResult, Sample, summarise
from composegen.evidence.ladder import Filler, Tokenizer, size_prompt
from composegen.wire import replies
from composegen.wire.http import SMALL_REPLY, STREAM_REPLY, WireError

TOLERANCE = 0.005  # the ladder's window, when no whole number of words gives the exact count
DURATION_POOL = 128  # distinct prompts per level with --duration (then reused in turn)
PREPARE_THREADS = 8  # /tokenize calls in flight while the prompts are made
_PATH = "/v1/chat/completions"


def _messages(salt: str, filler: str) -> list[dict]:
    return [{"role": "user", "content": f"{salt} {filler}"}]


class Prompts:
    """Exactly sized, pairwise different prompts: one filler text, a different index in front of each."""

    def __init__(self, tokenizer: Tokenizer, target: int, seed: int):
        self.tokenizer, self.target, self.seed = tokenizer, target, seed
        self.filler = Filler(seed)
        self.words: int | None = None
        self.exact = True

    def _salt(self, index: int) -> str:
        return f"[bench {self.seed:x}.{index:07d}]"

    def make(self, index: int) -> tuple[list[dict], int]:
        salt = self._salt(index)
        count = lambda n: self.tokenizer.count(_messages(salt, self.filler.text(n)))  # noqa: E731
        if self.words is not None:  # the same filler with another index: one /tokenize call, usually enough
            tokens = count(self.words)
            if tokens == self.target:
                return _messages(salt, self.filler.text(self.words)), tokens
        words, tokens, problem = size_prompt(count, self.target, self.target, self.target)
        if problem:
            low, high = math.ceil(self.target * (1 - TOLERANCE)), math.floor(self.target * (1 + TOLERANCE))
            words, tokens, problem = size_prompt(count, self.target, low, high)
            self.exact = False
        if problem:
            raise BadInput(f"bench: --input-tokens {self.target}: {problem}")
        self.words = words
        return _messages(salt, self.filler.text(words)), tokens

    def make_many(self, indices: list[int]) -> list[tuple[list[dict], int]]:
        """Several prompts: the first sized in turn, the rest checked by /tokenize calls in parallel (one
        each, usually; the sweep's setup should not take longer than the sweep)."""
        from concurrent.futures import ThreadPoolExecutor

        first = [self.make(indices[0])] if self.words is None and indices else []
        with ThreadPoolExecutor(PREPARE_THREADS) as pool:
            return first + list(pool.map(self.make, indices[len(first) :]))


async def _request(client, body: dict, input_tokens: int) -> Sample:
    """One streamed request, read within the client's timeout in all (a stream that never ends is an
    error, not a hang), at most STREAM_REPLY bytes, every event checked as a chat completion chunk."""
    import httpx

    sample = Sample(input_tokens=input_tokens)
    started = time.perf_counter()
    try:
        async with asyncio.timeout(client.timeout.read):
            return await _read_stream(client, body, sample, started)
    except TimeoutError:
        sample.error = f"no complete reply within {client.timeout.read:g} s"
    except httpx.HTTPError as exc:
        sample.error = f"request failed: {type(exc).__name__}: {exc}"
    except WireError as exc:
        sample.error = exc.message
    return sample


async def _read_stream(client, body: dict, sample: Sample, started: float) -> Sample:
    last = None
    usage = finish = None
    buffer = b""
    received = 0
    url = f"{client.base_url}{_PATH}"
    async with client.stream("POST", _PATH, json=body) as resp:
        if resp.status_code != 200:
            text = (await _capped(resp, SMALL_REPLY, url)).decode("utf-8", "replace")
            sample.error = f"HTTP {resp.status_code}: {_api_message(text)}"
            return sample
        async for piece in resp.aiter_bytes():
            now = time.perf_counter()
            received += len(piece)
            if received > STREAM_REPLY:
                raise WireError(f"{url}: the stream is larger than {STREAM_REPLY // 2**20} MiB; refused")
            buffer += piece.replace(b"\r\n", b"\n")  # SSE allows CRLF line ends
            *events, buffer = buffer.split(b"\n\n")
            for event in events:
                data = event.strip().removeprefix(b"data:").strip()
                if not data or data == b"[DONE]":
                    continue
                chunk = replies.chat_chunk(data, url)  # the fields read below, type-checked
                if chunk.get("error"):  # vLLM reports a failure inside the stream as an error event
                    sample.error = f"stream error: {_api_message(data.decode('utf-8', 'replace'))}"
                    return sample
                if chunk.get("usage"):
                    usage = chunk["usage"]
                for choice in chunk.get("choices") or ():
                    delta = choice.get("delta") or {}
                    if delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning"):
                        if last is None:
                            sample.ttft = now - started
                        else:
                            sample.itls.append(now - last)
                        last = now
                    finish = choice.get("finish_reason") or finish
    sample.e2el = time.perf_counter() - started
    if finish is None:
        sample.error = "the stream ended without a finish_reason"
    elif usage is None:
        sample.error = "the stream carried no usage (stream_options.include_usage)"
    else:
        sample.input_tokens = usage.get("prompt_tokens") or 0
        sample.output_tokens = usage.get("completion_tokens") or 0
    return sample


async def _capped(resp, cap: int, url: str) -> bytes:
    body = b""
    async for piece in resp.aiter_bytes():
        body += piece
        if len(body) > cap:
            raise WireError(f"{url}: the reply is larger than {cap // 2**20} MiB; refused")
    return body


def _api_message(text: str) -> str:
    try:
        doc = json.loads(text)
    except ValueError:
        return text[:200]
    error = doc.get("error") if isinstance(doc, dict) else None
    return str(error.get("message") if isinstance(error, dict) else error or doc)[:200]


def _client(base_url: str, api_key: str | None, timeout: float):
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


async def _level(connect, bodies: list[tuple[dict, int]], concurrency: int, requests: int | None, duration):
    """(samples, seconds, client CPU seconds) of one closed-loop level. Each worker has a client of its
    own with one connection: httpcore's pool scans every connection on every request, which at 64
    connections cost more CPU than the requests themselves."""
    samples: list[Sample] = []
    sent = 0
    clients = [connect() for _ in range(concurrency)]
    started = time.perf_counter()
    deadline = started + duration if duration is not None else math.inf
    cpu = time.process_time()

    async def worker(client) -> None:
        nonlocal sent
        while (sent < requests) if requests is not None else (time.perf_counter() < deadline):
            body, tokens = bodies[sent % len(bodies)]
            sent += 1
            samples.append(await _request(client, body, tokens))

    try:
        await asyncio.gather(*(worker(client) for client in clients))
        return samples, time.perf_counter() - started, time.process_time() - cpu
    finally:
        await asyncio.gather(*(client.aclose() for client in clients))


def _body(model: str, messages: list[dict], output_tokens: int) -> dict:
    return {
        "model": model,
        "messages": messages,
        "max_tokens": output_tokens,
        "ignore_eos": True,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def check_arguments(levels, input_tokens: int, output_tokens: int, requests, duration) -> list[int]:
    levels = [int(c) for c in levels]
    if not levels or any(c < 1 for c in levels):
        raise BadInput(f"bench: --concurrency: positive integers required, got {levels}")
    if (requests is None) == (duration is None):
        raise BadInput("bench: give exactly one of --requests N or --duration S")
    if requests is not None and requests < 1:
        raise BadInput(f"bench: --requests: must be ≥ 1, got {requests}")
    if duration is not None and not duration > 0:
        raise BadInput(f"bench: --duration: must be > 0 seconds, got {duration}")
    if input_tokens < 1 or output_tokens < 1:
        raise BadInput(f"bench: --input-tokens {input_tokens} / --output-tokens {output_tokens}: must be ≥ 1")
    return levels


def run_bench(
    base_url: str,
    model: str,
    levels,
    *,
    input_tokens: int,
    output_tokens: int,
    requests: int | None = None,
    duration: float | None = None,
    seed: int | None = None,
    api_key: str | None = None,
    slos: dict[str, float] | None = None,
    timeout: float = 600,
    emulated: bool | None = None,
) -> BenchResult:
    levels = check_arguments(levels, input_tokens, output_tokens, requests, duration)
    seed = seed if seed is not None else random.SystemRandom().randrange(2**31)
    prompts = Prompts(Tokenizer(base_url, model, api_key, timeout), input_tokens, seed)
    per_level = requests if requests is not None else max(DURATION_POOL, 4 * max(levels))
    warmup = _body(model, prompts.make(0)[0], output_tokens)
    plans = []
    for n, concurrency in enumerate(levels):
        made = prompts.make_many([1 + n * per_level + i for i in range(per_level)])
        plans.append((concurrency, [(_body(model, msgs, output_tokens), tokens) for msgs, tokens in made]))
    results = asyncio.run(_sweep(base_url, api_key, timeout, warmup, plans, requests, duration, slos))
    return BenchResult(
        model=model,
        input_tokens=input_tokens,
        input_tokens_exact=prompts.exact,
        output_tokens=output_tokens,
        requests=requests,
        duration_s=duration,
        seed=seed,
        goodput_slos_ms=slos,
        emulated=emulated,
        ok=all(lv.errors == 0 and lv.completed > 0 for lv in results),
        levels=results,
    )


async def _sweep(base_url, api_key, timeout, warmup: dict, plans, requests, duration, slos):
    results = []
    async with _client(base_url, api_key, timeout) as client:
        first = await _request(client, warmup, 0)
    if first.error:
        raise EngineError(f"bench: {base_url}{_PATH}: the warm-up request failed: {first.error}")
    for concurrency, bodies in plans:
        connect = functools.partial(_client, base_url, api_key, timeout)
        samples, seconds, cpu = await _level(connect, bodies, concurrency, requests, duration)
        distinct = min(len(samples), len(bodies))
        results.append(summarise(concurrency, samples, seconds, cpu_s=cpu, distinct_prompts=distinct, slos=slos))
    return results


def bench_stack(project, r, levels, **options) -> BenchResult:
    """run_bench against the profile's running stack (its endpoint found as gate and ladder find it)."""
    from composegen.stack import driver

    ctr = driver.running_container(project, r)
    ep = driver.endpoint(r)
    emulated = driver.live_identity(ctr)["emulated"]
    return run_bench(ep.base_url, r.profile.model.served_name, levels, api_key=ep.api_key, emulated=emulated, **options)
