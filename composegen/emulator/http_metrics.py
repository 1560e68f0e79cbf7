"""The http_* families vLLM's API server gets from prometheus-fastapi-instrumentator, as recorded
(0.26.0).

Per request: the route (`none` for an unknown path) and method, the status as a class (`2xx`,
`4xx`), the request's and the response's content-length, and the duration. Like vLLM, /metrics,
/health, /load, /ping, /version and /server_info are not counted. A streamed response has no
content-length: 0 bytes."""

from __future__ import annotations

from typing import NamedTuple

from composegen.emulator.exposition import Histogram, family, sample_lines

UNCOUNTED = frozenset(("/metrics", "/health", "/load", "/ping", "/version", "/server_info"))
_NOTE = "Only value of header is respected. Otherwise ignored. No percentile calculated. "
_HIGHR = "0.01 0.025 0.05 0.075 0.1 0.25 0.5 0.75 1 1.5 2 2.5 3 3.5 4 4.5 5 7.5 10 30 60"
HELP = {
    "http_requests": "Total number of requests by method, status and handler.",
    "http_request_size_bytes": f"Content length of incoming requests by handler. {_NOTE}",
    "http_response_size_bytes": f"Content length of outgoing responses by handler. {_NOTE}",
    "http_request_duration_highr_seconds": "Latency with many buckets but no API specific labels. "
    "Made for more accurate percentile calculations. ",
    "http_request_duration_seconds": "Latency with only few buckets by handler. "
    "Made to be only used if aggregation by handler is important. ",
}


class HttpRequest(NamedTuple):
    """One answered HTTP request (route None: a path the server does not know)."""

    method: str
    route: str | None
    status: int
    request_bytes: int
    response_bytes: int
    seconds: float


class HttpMetrics:
    """Not thread-safe by itself: Metrics calls it under its lock."""

    def __init__(self, created: float) -> None:
        self.created = created
        # (handler, method, status class) -> count
        self.requests: dict[tuple[str, str, str], float] = {}
        # handler -> [requests, request bytes, response bytes]
        self.sizes: dict[str, list[float]] = {}
        self.highr = Histogram(_HIGHR.split())
        self.durations: dict[tuple[str, str], Histogram] = {}  # (handler, method)

    def observe(self, request: HttpRequest) -> None:
        method, route, status, request_bytes, response_bytes, seconds = request
        if route in UNCOUNTED:
            return
        handler = route or "none"
        key = (handler, method, f"{status // 100}xx")
        self.requests[key] = self.requests.get(key, 0) + 1
        sizes = self.sizes.setdefault(handler, [0, 0, 0])
        sizes[0] += 1
        sizes[1] += request_bytes
        sizes[2] += response_bytes
        self.highr.observe(seconds)
        self.durations.setdefault((handler, method), Histogram((0.1, 0.5, 1.0))).observe(seconds)

    def render(self) -> list[str]:
        out: list[str] = []

        def with_created(name: str, kind: str, samples: list[str], labels: list[dict]) -> None:
            base = name.removesuffix("_total")
            out.extend([f"# HELP {name} {HELP[base]}", f"# TYPE {name} {kind}", *samples])
            created = [(ls, self.created) for ls in labels]
            out.extend(family(f"{base}_created", "gauge", HELP[base], created))

        counts = [
            ({"handler": h, "method": m, "status": s}, n) for (h, m, s), n in self.requests.items()
        ]
        requests = sample_lines("http_requests_total", counts)
        with_created("http_requests_total", "counter", requests, [labels for labels, _ in counts])
        by_handler = [{"handler": h} for h in self.sizes]
        for name, index in (("http_request_size_bytes", 1), ("http_response_size_bytes", 2)):
            lines = []
            for labels, sizes in zip(by_handler, self.sizes.values(), strict=True):
                lines += sample_lines(f"{name}_count", [(labels, sizes[0])])
                lines += sample_lines(f"{name}_sum", [(labels, sizes[index])])
            with_created(name, "summary", lines, by_handler)
        highr = "http_request_duration_highr_seconds"
        with_created(highr, "histogram", self.highr.samples(highr, {}), [{}])
        timed = [{"handler": h, "method": m} for h, m in self.durations]
        lines = []
        for labels, histogram in zip(timed, self.durations.values(), strict=True):
            lines += histogram.samples("http_request_duration_seconds", labels)
        with_created("http_request_duration_seconds", "histogram", lines, timed)
        return out
