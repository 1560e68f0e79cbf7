"""Live progress for `up` on stderr: one updating line on a terminal, plain lines elsewhere."""

from __future__ import annotations

import sys

from composegen.output import err
from composegen.stack.driver import Progress

LOG_EVERY_S = 30.0
_MARK = {"ok": "ok  ", "warn": "warn", "fail": "FAIL"}


def console_progress(quiet: bool = False) -> Progress:
    if quiet:
        return Progress()
    tty = sys.stderr.isatty()
    state = {"phase": "starting", "printed": 0.0, "last": ""}

    def check(c):
        err(f"preflight {_MARK[c.status]} {c.name}: {c.message}")

    def phase(name: str, t: float):
        state["phase"] = name
        if tty:
            sys.stderr.write("\r\x1b[2K")
        err(f"[{t:7.1f}s] {name}")

    def tick(t: float, last: str):
        if tty:
            width = 100
            sys.stderr.write(f"\r\x1b[2K[{t:7.1f}s] {state['phase']} … {last[-(width - 30) :]}")
            sys.stderr.flush()
        elif last and (t - state["printed"] >= LOG_EVERY_S and last != state["last"]):
            # In CI logs: a line every 30 s with the engine's latest line, so a 30-minute load is not silent.
            state["printed"], state["last"] = t, last
            err(f"[{t:7.1f}s] {state['phase']} … {last}")

    return Progress(check=check, phase=phase, tick=tick)


def summary_text(result) -> str:
    s = result.startup or {}
    gib = lambda v: f"{v:.2f} GiB" if isinstance(v, (int, float)) else "n/a"  # noqa: E731
    per_rank = ", ".join(f"{v:.2f}" for v in s.get("kv_cache_gib_per_rank") or []) or "n/a"
    lines = [
        f"{result.name} is ready at {result.endpoint}" + (" (EMULATED vLLM)" if result.emulated else ""),
        f"  time to ready       {result.time_to_ready_s:.1f} s (detected {result.detection_latency_s if result.detection_latency_s is not None else 'n/a'} s after the engine logged startup complete)",
        f"  KV cache            {s.get('kv_cache_tokens') if s.get('kv_cache_tokens') is not None else 'n/a':,} tokens"
        if isinstance(s.get("kv_cache_tokens"), int)
        else "  KV cache            n/a",
        f"  max concurrency     {s.get('max_concurrency')}x at {s.get('max_model_len')} tokens",
        f"  KV GiB per rank     {per_rank} (min {gib(s.get('kv_cache_gib_min'))})",
        f"  weights             {gib(s.get('weights_gib'))}",
        f"  peak activation     {gib(s.get('peak_activation_gib'))}",
    ]
    for m in s.get("mismatches") or []:
        lines.append(f"  MISMATCH  {m['flag']}: profile {m['profile']!r}, engine {m['engine']!r}")
    for w in result.warnings:
        lines.append(f"  warning: {w}")
    return "\n".join(lines) + "\n"
