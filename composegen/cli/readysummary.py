"""The summary `up` and `wait` print when the stack is ready: time to ready, KV cache, memory,
mismatches and warnings."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from composegen.output import fold
from composegen.stack.reports import UpReport
from composegen.units import format_gib


def _said_by_preflight(warning: str, result: UpReport) -> bool:
    """A clamped ulimit is the preflight `ulimits` warning again: said once per `up`."""
    warned = [c.name for c in result.checks if c.status == "warn"]
    # NODE: ulimit
    about_ulimit = warning.startswith("ulimit ") or warning.split(": ", 1)[-1].startswith("ulimit ")
    return about_ulimit and any(n.endswith("ulimits") for n in warned)


def summary_text(result: UpReport, width: int | None = None) -> str:
    """What `up` and `wait` print when the stack is ready; warnings folded at words under `width` (a
    terminal)."""
    s = result.startup.to_json() if result.startup else {}  # the startup report's fields by name
    gib = lambda v: format_gib(v) if isinstance(v, (int, float)) else "n/a"  # noqa: E731
    per_rank = ", ".join(f"{v:.2f}" for v in s.get("kv_cache_gib_per_rank") or []) or "n/a"
    latency = result.detection_latency_s if result.detection_latency_s is not None else "n/a"
    lines = [
        f"{result.name} is ready at {result.endpoint}"
        + (" (EMULATED vLLM)" if result.emulated else ""),
        f"  time to ready       {result.time_to_ready_s:.1f} s "
        + (
            "(from its log: it was ready before this command)"
            if result.ready_before
            else f"(seen {latency} s after the engine said so)"
        ),
        f"  KV cache            {s['kv_cache_tokens']:,} tokens"
        if isinstance(s.get("kv_cache_tokens"), int)
        else "  KV cache            n/a",
        f"  max concurrency     {s.get('max_concurrency')}x at {s.get('max_model_len')} tokens",
        f"  KV GiB per rank     {per_rank} (min {gib(s.get('kv_cache_gib_min'))})",
        f"  weights             {gib(s.get('weights_gib'))}",
        f"  peak activation     {gib(s.get('peak_activation_gib'))}",
    ]
    if s.get("cache"):  # torch.compile's cache as the engine's own lines say (docs/caches.md)
        lines.append(f"  compile cache       {warmth(s, result.emulated)}")
    for m in s.get("mismatches") or []:
        lines.append(f"  MISMATCH  {m['flag']}: profile {m['profile']!r}, engine {m['engine']!r}")
    # the startup log's own (a cut args line, …)
    for w in [*result.warnings, *(s.get("warnings") or [])]:
        if _said_by_preflight(w, result):
            continue
        lines.append(fold(f"  warning: {w}", width))
    return "\n".join(lines) + "\n"


def warmth(s: Mapping[str, Any], emulated: bool) -> str:
    """`warm start: torch.compile from cache 1.1 s, cold was 9.9 s` (the record's last cold start)."""
    cold = s.get("cache_cold_compile_seconds")
    said = f"{s['cache']} start: torch.compile{' from cache' * (s['cache'] == 'warm')} {s.get('compile_seconds')} s"
    if s["cache"] != "cold":
        said += f", cold was {cold} s" if cold is not None else ", cold figure unknown"
    return said + " (EMULATED)" * emulated
