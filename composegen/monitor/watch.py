"""Scrape an engine's /metrics and turn the scrapes into `top` samples: once, or one per
interval."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator

from composegen.errors import EngineError
from composegen.monitor.reports import TopSample
from composegen.monitor.sample import Scrape, compute
from composegen.stack.readiness import Endpoint
from composegen.wire.http import METRICS_REPLY, WireError


def scrape(ep: Endpoint, timeout: float = 5.0) -> Scrape:
    """One /metrics page within `timeout` seconds in all and METRICS_REPLY bytes (a drip-fed or
    endless page is a clear error, not a hang)."""
    url = f"{ep.base_url}/metrics"
    try:
        status, body = ep.get("/metrics", timeout=timeout, cap=METRICS_REPLY)
    except WireError as exc:
        raise EngineError(f"cannot read {url}: {exc.message.removeprefix(url + ': ')}") from None
    if status != 200:
        raise EngineError(f"{url} answered HTTP {status}")
    try:
        return Scrape.parse(body.decode("utf-8", "replace"), time.monotonic())
    except ValueError as exc:
        raise EngineError(f"{url} is not Prometheus text: {exc}") from None


class Window:
    """The scrapes of the last `seconds`: each new one is compared with the oldest still inside."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.scrapes: deque[Scrape] = deque()

    def add(self, latest: Scrape) -> Scrape | None:
        """Keep `latest`; return the scrape to compare it with (None for the very first)."""
        while len(self.scrapes) > 1 and latest.at - self.scrapes[1].at >= self.seconds:
            self.scrapes.popleft()
        before = self.scrapes[0] if self.scrapes else None
        self.scrapes.append(latest)
        return before


def once(
    ep: Endpoint, interval: float, *, name: str | None = None, view: str = "single"
) -> TopSample:
    """One sample over `interval` seconds: two scrapes that far apart."""
    first = scrape(ep)
    time.sleep(interval)
    return compute(first, scrape(ep), url=ep.base_url, name=name, view=view)


def watch(
    ep: Endpoint,
    interval: float,
    window: float,
    *,
    name: str | None = None,
    view: str = "single",
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[TopSample]:
    """A sample every `interval` seconds, rates over up to the last `window` seconds; endless."""
    recent = Window(window)
    latest = scrape(ep)
    recent.add(latest)
    while True:
        sleep(max(0.0, interval - (time.monotonic() - latest.at)))
        latest = scrape(ep)
        yield compute(recent.add(latest), latest, url=ep.base_url, name=name, view=view)
