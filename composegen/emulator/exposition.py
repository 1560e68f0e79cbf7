"""Prometheus text exposition (format 1.0.0) as prometheus_client writes it, for the stdlib-only
emulator.

Labels sorted by name, values as Python float reprs, histograms as cumulative `_bucket{le}` +
`_count` + `_sum`; also the python_* / process_* families prometheus_client's default collectors
add."""

from __future__ import annotations

import gc
import math
import os
import resource
import sys
import time
from collections.abc import Iterable


def token_buckets(max_model_len: int) -> tuple[int, ...]:
    """vLLM's 1-2-5 buckets up to max-model-len (1, 2, 5, 10, 20, 50, … ≤ max_model_len)."""
    out: list[int] = []
    scale = 1
    while True:
        for mantissa in (1, 2, 5):
            if mantissa * scale > max_model_len:
                return tuple(out)
            out.append(mantissa * scale)
        scale *= 10


def format_value(value: float) -> str:
    """Python's float repr, as prometheus_client writes it (1.0, 0.25, 1.796e+09, +Inf)."""
    value = float(value)
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


def _escape(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(labels: dict) -> str:
    """`{a="1",b="2"}` with the names sorted, as prometheus_client writes them; "" without
    labels."""
    if not labels:
        return ""
    return "{" + ",".join(f'{key}="{_escape(labels[key])}"' for key in sorted(labels)) + "}"


def family(name: str, kind: str, help_text: str, samples: list[tuple[dict, float]]) -> list[str]:
    return [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", *sample_lines(name, samples)]


def sample_lines(name: str, samples: list[tuple[dict, float]]) -> list[str]:
    return [f"{name}{_labels(labels)} {format_value(value)}" for labels, value in samples]


class Histogram:
    def __init__(self, buckets: Iterable[float | str]) -> None:
        self.buckets = tuple(float(b) for b in buckets)
        self.counts = [0] * len(self.buckets)
        self.total = 0.0
        self.count = 0

    def observe(self, value: float, times: int = 1) -> None:
        if times <= 0:
            return
        for i, upper in enumerate(self.buckets):
            if value <= upper:
                self.counts[i] += times
        self.total += value * times
        self.count += times

    def render(self, name: str, help_text: str, labels: dict) -> list[str]:
        head = [f"# HELP {name} {help_text}", f"# TYPE {name} histogram"]
        return head + self.samples(name, labels)

    def samples(self, name: str, labels: dict) -> list[str]:
        """The sample lines alone: a family with several label sets writes its header once."""
        lines = []
        for upper, count in zip(self.buckets, self.counts, strict=True):
            lines.append(
                f"{name}_bucket{_labels({**labels, 'le': format_value(upper)})} {format_value(count)}"
            )
        lines.append(f"{name}_bucket{_labels({**labels, 'le': '+Inf'})} {format_value(self.count)}")
        lines.append(f"{name}_count{_labels(labels)} {format_value(self.count)}")
        lines.append(f"{name}_sum{_labels(labels)} {format_value(self.total)}")
        return lines


_START = time.time()


def process_families() -> list[str]:
    """The python_* and process_* families prometheus_client's default collectors add, from this
    process."""
    out: list[str] = []
    stats = gc.get_stats()
    for key, name, help_text in (
        ("collected", "python_gc_objects_collected_total", "Objects collected during gc"),
        (
            "uncollectable",
            "python_gc_objects_uncollectable_total",
            "Uncollectable objects found during GC",
        ),
        (
            "collections",
            "python_gc_collections_total",
            "Number of times this generation was collected",
        ),
    ):
        out += family(
            name,
            "counter",
            help_text,
            [({"generation": str(i)}, s[key]) for i, s in enumerate(stats)],
        )
    v = sys.version_info
    info = {
        "implementation": "CPython",
        "major": str(v.major),
        "minor": str(v.minor),
        "patchlevel": str(v.micro),
    }
    info["version"] = f"{v.major}.{v.minor}.{v.micro}"
    out += family("python_info", "gauge", "Python platform information", [(info, 1)])
    page = resource.getpagesize()
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            vms, rss = (int(x) * page for x in fh.read().split()[:2])
        fds = len(os.listdir("/proc/self/fd"))
    except OSError:
        vms = rss = fds = 0
    usage = resource.getrusage(resource.RUSAGE_SELF)
    for name, kind, help_text, value in (
        ("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", vms),
        ("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", rss),
        (
            "process_start_time_seconds",
            "gauge",
            "Start time of the process since unix epoch in seconds.",
            _START,
        ),
        (
            "process_cpu_seconds_total",
            "counter",
            "Total user and system CPU time spent in seconds.",
            usage.ru_utime + usage.ru_stime,
        ),
        ("process_open_fds", "gauge", "Number of open file descriptors.", fds),
        (
            "process_max_fds",
            "gauge",
            "Maximum number of open file descriptors.",
            resource.getrlimit(resource.RLIMIT_NOFILE)[0],
        ),
    ):
        out += family(name, kind, help_text, [({}, value)])
    return out
