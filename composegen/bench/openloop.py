"""Open-loop levels: requests sent on a schedule (schedule.py) whatever the server does, as
`vllm bench serve --request-rate` sends them, so queueing shows instead of slowing the client down.

Each request takes an idle connection or opens one (no cap: the schedule, not a pool, decides how
many are in flight). The sender sleeps to just before each due time (uvloop's timers have 1 ms steps: the
last SPIN_S is polled) and starts the request's task LEAD_S early; the task polls to the due time
and writes at once on a kept-alive connection, so a send does not wait a loop turn behind the
streams' data callbacks. The request's bytes are encoded before the wait, and the cyclic garbage
collector runs only in the gaps between sends (gcpause.py). Per level it records what the closed
loop does plus: the lateness of each send (actual minus scheduled), the achieved request rate
(requests / seconds from the start to the last send), the requests in flight the client saw at
each send, and — when the server exports vllm:request_queue_time_seconds — the mean time requests
waited in its queue.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from composegen.bench import gcpause, stream
from composegen.bench.schedule import INF
from composegen.bench.stats import Sample, spread
from composegen.bench.stream import ChatRequest

SPIN_S = 0.0015  # the last stretch before a send is polled, not slept
# the request's task is started this long before its due time and polls the rest itself, so the
# send is not one loop turn (behind the streams' data callbacks) after the due time
LEAD_S = 0.0005
_PATH = "/v1/chat/completions"


@dataclass
class OpenLevel:
    samples: list[Sample]
    seconds: float  # level start -> last request finished
    cpu_s: float
    lateness: list[float]  # seconds, per request: sample.started - scheduled
    in_flight: list[int]  # requests in flight at each send (before it)
    last_send: float  # seconds from the level's start to the last send


async def _until(due: float) -> None:
    while (left := due - time.perf_counter()) > SPIN_S:
        await asyncio.sleep(left - SPIN_S)
    while time.perf_counter() < due:
        await asyncio.sleep(0)


async def run_level(
    connect: Callable[[], stream.StreamClient],
    bodies: list[tuple[ChatRequest, int]],
    offsets: list[float],
) -> OpenLevel:
    idle: list[stream.StreamClient] = []
    opened: list[stream.StreamClient] = []
    samples: list[Sample] = []
    lateness: list[float] = []
    in_flight: list[int] = []
    active = 0

    async def one(data: bytes, tokens: int, most: int | None, due: float) -> None:
        nonlocal active
        await _until(due)
        in_flight.append(active)
        client = idle.pop() if idle else connect()
        if client not in opened:
            opened.append(client)
        active += 1
        try:
            sample = await client.send(data, tokens, most)
        finally:
            active -= 1
            idle.append(client)
        lateness.append(sample.started - due)
        samples.append(sample)

    idle.append(connect())  # not connected yet: the first request's client, and the encoder
    encoder = idle[0]
    started, cpu = time.perf_counter(), time.process_time()
    tasks = []
    try:
        with gcpause.between_sends() as collector:
            for n, offset in enumerate(offsets):
                due = started + offset
                body, tokens = bodies[n % len(bodies)]
                data = encoder.encode(_PATH, body)  # before the wait: the send does no JSON work
                collector.maybe_collect(due - LEAD_S - time.perf_counter())
                await _until(due - LEAD_S)
                tasks.append(asyncio.create_task(one(data, tokens, body.get("max_tokens"), due)))
        await asyncio.gather(*tasks)  # the last send is out: collection is automatic again
        last_send = max((s.started for s in samples), default=started) - started
        seconds, cpu_s = time.perf_counter() - started, time.process_time() - cpu
        return OpenLevel(samples, seconds, cpu_s, lateness, in_flight, last_send)
    finally:
        for client in opened:
            client.close()


def open_fields(
    level: OpenLevel, rate: float, burstiness: float, seed: int
) -> dict[str, float | str | None]:
    """The open-loop figures of a LevelResult (reports.py); without a cap the client's queue is
    the send lateness."""
    sent = len(level.in_flight)
    return {
        "request_rate": "inf" if rate == INF else rate,
        "burstiness": burstiness,
        "schedule_seed": seed,
        "achieved_request_rate": (
            round(sent / level.last_send, 3) if rate != INF and level.last_send > 0 else None
        ),
        "in_flight_mean": round(sum(level.in_flight) / sent, 3) if sent else None,
        "in_flight_max": max(level.in_flight) if sent else None,
        **spread(level.lateness, "send_lateness"),
        **spread(level.lateness, "client_queue"),
    }
