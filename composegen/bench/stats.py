"""Load-benchmark figures: per-request samples summarised per concurrency level, with `vllm bench
serve`'s names, so a composegen bench reads like the upstream tool's output and can be compared with
it.

Per level (closed loop: `concurrency` requests always in flight):
  completed / errors     requests that streamed to a finish / that failed (HTTP error, broken stream);
                         completed + errors is every request sent
  duration               seconds from the first request sent to the last one finished
  request_throughput     completed / duration;  output_throughput  output tokens / duration;
  total_token_throughput (input + output tokens) / duration (API-reported usage)
  ttft_ms   request start -> first streamed content or reasoning delta
  tpot_ms   (e2el − ttft) / (output tokens − 1), per request with ≥ 2 output tokens
  itl_ms    every gap between two streamed deltas, over all requests
  e2el_ms   request start -> end of the stream
  mean / median / p90 / p99 of each (linear-interpolated percentiles, as numpy's default); null when
  no value exists. request_goodput: requests meeting every SLO (`ttft`, `tpot`, `e2el` in ms) /
  duration. client_cpu_ms_per_request: this process's CPU time during the level / requests sent —
  what the client itself costs, so a slow client cannot hide behind a slow server; client_cpu_share:
  that CPU time / duration (the client is one asyncio thread: near 1 it was the bottleneck, and the
  text output warns).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from composegen.bench.reports import BenchResult, LevelResult
from composegen.bench.spec import BenchSpec, describe
from composegen.errors import BadInput

METRICS = ("ttft", "tpot", "itl", "e2el")
STATS = ("mean", "median", "p90", "p99")
SLO_METRICS = ("ttft", "tpot", "e2el")
CLIENT_BUSY = 0.7  # share of one core above which the client itself may be what limits a level


@dataclass
class Sample:
    """One request as the client saw it (seconds, perf_counter based)."""

    ttft: float | None = None
    e2el: float | None = None
    itls: list[float] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    error: str | None = None
    started: float = 0.0  # perf_counter at the request's start (vLLM's per-second peaks need it)

    @property
    def tpot(self) -> float | None:
        if self.error or self.ttft is None or self.e2el is None or self.output_tokens < 2:
            return None
        return (self.e2el - self.ttft) / (self.output_tokens - 1)


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy.percentile's default method)."""
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def spread(seconds: list[float], name: str) -> dict[str, float | None]:
    """NAME_p50_ms, NAME_p99_ms and NAME_max_ms; Nones without values."""
    ms = [s * 1000 for s in seconds]
    figures = (percentile(ms, 50), percentile(ms, 99), max(ms)) if ms else (None,) * 3
    return {
        f"{name}_{stat}_ms": None if v is None else round(v, 3)
        for stat, v in zip(("p50", "p99", "max"), figures, strict=True)
    }


def _stats(values: list[float]) -> dict[str, float | None]:
    if not values:
        return dict.fromkeys(STATS)
    ms = [v * 1000 for v in values]
    return {
        "mean": round(sum(ms) / len(ms), 3),
        "median": round(percentile(ms, 50), 3),
        "p90": round(percentile(ms, 90), 3),
        "p99": round(percentile(ms, 99), 3),
    }


def _good(sample: Sample, slos: dict[str, float]) -> bool:
    for name, limit_ms in slos.items():
        value = getattr(sample, name)
        if value is None or value * 1000 > limit_ms:
            return False
    return True


def summarise(
    concurrency: int,
    samples: list[Sample],
    duration: float,
    *,
    cpu_s: float,
    distinct_prompts: int,
    slos: dict[str, float] | None = None,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
) -> LevelResult:
    """`input_tokens` / `output_tokens`: what each request asked for (None: not checked)."""
    ok = [s for s in samples if s.error is None]
    failed = [s.error for s in samples if s.error is not None]
    inputs = sum(s.input_tokens for s in ok)
    outputs = sum(s.output_tokens for s in ok)
    per_s = (lambda n: round(n / duration, 3)) if duration > 0 else (lambda n: 0.0)
    values: dict[str, list[float]] = {
        "ttft": [s.ttft for s in ok if s.ttft is not None],
        "tpot": [t for s in ok if (t := s.tpot) is not None],
        "itl": [gap for s in ok for gap in s.itls],
        "e2el": [s.e2el for s in ok if s.e2el is not None],
    }
    figures: dict = {}
    for metric in METRICS:
        for stat, value in _stats(values[metric]).items():
            figures[f"{stat}_{metric}_ms"] = value
    return LevelResult(
        concurrency=concurrency,
        completed=len(ok),
        errors=len(failed),
        error_messages=list(dict.fromkeys(failed))[:5],
        duration=round(duration, 6),
        total_input_tokens=inputs,
        total_output_tokens=outputs,
        request_throughput=per_s(len(ok)),
        output_throughput=per_s(outputs),
        total_token_throughput=per_s(inputs + outputs),
        request_goodput=per_s(sum(1 for s in ok if _good(s, slos))) if slos else None,
        distinct_prompts=distinct_prompts,
        client_cpu_ms_per_request=round(cpu_s * 1000 / len(samples), 4) if samples else None,
        client_cpu_share=round(cpu_s / duration, 3) if duration > 0 else 0.0,
        short_outputs=sum(
            1 for s in ok if output_tokens is not None and s.output_tokens < output_tokens
        ),
        input_tokens_off=sum(
            1 for s in ok if input_tokens is not None and s.input_tokens != input_tokens
        ),
        **figures,
    )


def spec_level(
    o: BenchSpec, concurrency: int, samples: list[Sample], seconds: float, cpu_s: float, pool: int
) -> LevelResult:
    """summarise under O's sizes and SLOs; POOL: the distinct prompts the level drew from."""
    return summarise(
        concurrency,
        samples,
        seconds,
        cpu_s=cpu_s,
        distinct_prompts=min(len(samples), pool),
        slos=o.goodput,
        input_tokens=o.input_tokens,
        output_tokens=o.output_tokens,
    )


def parse_slos(text: str | None) -> dict[str, float] | None:
    """`ttft:500,tpot:50` (milliseconds; comma or space separated, as vllm bench serve's --goodput)."""
    if not text:
        return None
    expected = f"expected NAME:MILLISECONDS with NAME one of {', '.join(SLO_METRICS)}"
    return parse_limits(
        text.replace(",", " ").split(), ":", SLO_METRICS, f"--goodput: {{}}: {expected}"
    )


def parse_limits(parts: list[str], sep: str, names: tuple[str, ...], bad: str) -> dict[str, float]:
    """NAME<sep>MILLISECONDS parts -> {name: limit}; BadInput `bad` (with the part) for any other."""
    limits: dict[str, float] = {}
    for part in parts:
        name, _, value = part.partition(sep)
        try:
            limit = float(value)
        except ValueError:
            limit = -1.0
        if name not in names or not limit > 0:
            raise BadInput(bad.format(repr(part)))
        limits[name] = limit
    return limits


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def format_text(result: BenchResult) -> str:
    mode = (
        f"{result.requests} requests" if result.requests is not None else f"{result.duration_s:g} s"
    )
    lines = [
        f"bench {result.model}: {result.input_tokens} input / {result.output_tokens} output tokens, {mode} "
        f"per level, seed {result.seed}" + (" (EMULATED vLLM)" if result.emulated else ""),
        f"{'conc':>5} {'done':>6} {'err':>4} {'req/s':>8} {'out tok/s':>10} {'TTFT med':>9} {'TTFT p99':>9} "
        f"{'TPOT med':>9} {'ITL p99':>8} {'E2EL p99':>9}"
        + (f" {'goodput':>8}" if result.goodput_slos_ms else ""),
    ]
    for lv in result.levels:
        lines.append(
            f"{lv.concurrency:>5} {lv.completed:>6} {lv.errors:>4} {lv.request_throughput:>8.2f} "
            f"{lv.output_throughput:>10,.1f} {_ms(lv.median_ttft_ms):>9} {_ms(lv.p99_ttft_ms):>9} "
            f"{_ms(lv.median_tpot_ms):>9} {_ms(lv.p99_itl_ms):>8} {_ms(lv.p99_e2el_ms):>9}"
            + (f" {lv.request_goodput:>8.2f}" if lv.request_goodput is not None else "")
        )
        for message in lv.error_messages:
            lines.append(f"      error: {message}")
    busy = [lv.concurrency for lv in result.levels if lv.client_cpu_share > CLIENT_BUSY]
    if busy:
        lines.append(
            f"warning: the client was busy more than {CLIENT_BUSY:.0%} of the time at concurrency "
            f"{', '.join(map(str, busy))}: those figures may be limited by this machine, not the server"
        )
    off = sum(lv.input_tokens_off for lv in result.levels)
    if off:
        lines.append(
            f"warning: {off} request(s) had another prompt size in the API's usage than /tokenize gave"
        )
    elif not result.input_tokens_exact:  # a result from before exact sizing
        lines.append(
            "note: some prompts could not be sized to exactly the input tokens (whole words)"
        )
    short = sum(lv.short_outputs for lv in result.levels)
    if short:
        lines.append(
            f"FAILED: {short} request(s) stopped before {result.output_tokens} output tokens (usage): the server "
            "did not honour ignore_eos, or hit a limit; the throughput figures are not for that output size"
        )
    failed = any(lv.errors or not lv.completed for lv in result.levels)
    why = (
        "a level had errors or completed nothing"
        if failed
        else "requests stopped short of the output tokens"
    )
    lines += [f"context: {describe(result.comparability)}"] if result.comparability else []
    lines.append("times in ms; " + ("ok" if result.ok else f"FAILED: {why}"))
    return "\n".join(lines) + "\n"


def format_markdown(result: BenchResult) -> str:
    head = "| Concurrency | Completed | Errors | req/s | output tok/s | TTFT median ms | TTFT p99 ms | TPOT median ms"
    lines = [head + " | ITL p99 ms | E2EL p99 ms |", "|" + "---|" * 10]
    for lv in result.levels:
        lines.append(
            f"| {lv.concurrency} | {lv.completed} | {lv.errors} | {lv.request_throughput:.2f} | "
            f"{lv.output_throughput:,.1f} | {_ms(lv.median_ttft_ms)} | {_ms(lv.p99_ttft_ms)} | "
            f"{_ms(lv.median_tpot_ms)} | {_ms(lv.p99_itl_ms)} | {_ms(lv.p99_e2el_ms)} |"
        )
    return "\n".join(lines) + "\n"
