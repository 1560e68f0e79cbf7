"""The text and Markdown forms of an open-loop bench (`bench --request-rate`, `--find-max`): one
row per level with the rate asked and achieved, the send lateness, the queueing it caused, the
closed loop's latency figures, the frontier pair and the SLO verdict. (A closed loop's table is
stats.py's.)"""

from __future__ import annotations

from composegen.bench.reports import BenchResult, FindMax, LevelResult
from composegen.bench.spec import describe
from composegen.bench.stats import CLIENT_BUSY
from composegen.output import md_cell


def _n(value: float | None, spec: str = ",.1f") -> str:
    return "-" if value is None else format(value, spec)


def _row(lv: LevelResult) -> str:
    verdict = "" if lv.slo_met is None else (" pass" if lv.slo_met else " FAIL")
    rate = lv.request_rate if isinstance(lv.request_rate, str) else _n(lv.request_rate, "g")
    return (
        f"{rate:>6} {_n(lv.achieved_request_rate, '.2f'):>7} {lv.completed:>5} {lv.errors:>4} "
        f"{_n(lv.send_lateness_p99_ms, '.2f'):>8} {_n(lv.in_flight_max, 'd'):>6} "
        f"{_n(lv.server_queue_mean_ms):>8} {_n(lv.p99_ttft_ms):>9} {_n(lv.p99_tpot_ms):>9} "
        f"{_n(lv.p99_e2el_ms):>9} {_n(lv.output_throughput_per_gpu):>9} "
        f"{_n(lv.tokens_per_s_per_user):>8}{verdict}"
    )


def _find_max(found: FindMax) -> list[str]:
    limits = _limits(found.slos)
    if found.best_rate is None:
        answer = f"no rate met {limits}: not even the lower bound {found.low:g} req/s"
    elif found.first_failing_rate is None:
        answer = f"the upper bound {found.high:g} req/s met {limits}: the maximum is at least that"
    else:
        answer = (
            f"highest rate meeting {limits}: {found.best_rate:g} req/s "
            f"({found.first_failing_rate:g} failed)"
        )
    spread = ", ".join(f"{k} {v:g}" for k, v in found.spread.items())
    per = found.requests_per_level
    return [
        f"find-max: {answer}",
        f"  {len(found.probes)} of {found.max_levels} levels probed, {found.repeats} repeat(s) "
        f"each, {per if per is not None else 'duration-sized'} requests per level"
        + (f"; spread (max − min) between repeats at the answer: {spread}" if spread else ""),
    ]


def format_text(result: BenchResult) -> str:
    mode = (
        f"{result.requests} requests" if result.requests is not None else f"{result.duration_s:g} s"
    )
    burst = result.levels[0].burstiness if result.levels else None
    lines = [
        f"bench {result.model} (open loop, burstiness {_n(burst, 'g')}): {result.input_tokens} "
        f"input / {result.output_tokens} output tokens, {mode} per level, seed {result.seed}"
        + (" (EMULATED vLLM)" if result.emulated else ""),
        f"{'rate':>6} {'sent/s':>7} {'done':>5} {'err':>4} {'late p99':>8} {'inflt':>6} "
        f"{'queue':>8} {'TTFT p99':>9} {'TPOT p99':>9} {'E2EL p99':>9} {'tok/s/GPU':>9} "
        f"{'tok/s/u':>8}" + (" SLO" if result.slos else ""),
    ]
    for lv in result.levels:
        lines.append(_row(lv))
        lines += [f"      SLO: {failure}" for failure in lv.slo_failures]
        lines += [f"      error: {message}" for message in lv.error_messages]
    if result.find_max is not None:
        lines += _find_max(result.find_max)
    busy = [lv.key() for lv in result.levels if lv.client_cpu_share > CLIENT_BUSY]
    if busy:
        lines.append(
            f"warning: the client was busy more than {CLIENT_BUSY:.0%} of the time at "
            f"{', '.join(busy)}: its sends may be late because of this machine, not the server"
        )
    lines += [f"context: {describe(result.comparability)}"] if result.comparability else []
    lines.append(
        "times in ms (late: actual send − scheduled; inflt: most requests in flight at a send; "
        "queue: the server's mean queue time); " + ("ok" if result.ok else "FAILED")
    )
    return "\n".join(lines) + "\n"


HEAD = ["Rate req/s", "Achieved req/s", "Completed", "Errors", "Send lateness p99 ms"]
HEAD += ["In flight max", "Server queue mean ms", "TTFT p99 ms", "TPOT median ms", "E2EL p99 ms"]
HEAD += ["output tok/s", "tok/s per GPU", "tok/s per user"]


def head(result: BenchResult) -> list[str]:
    """The open-loop table's columns (Markdown and the HTML report), SLO last when judged."""
    return HEAD + ([f"SLO {_limits(result.slos)}"] if result.slos else [])


def _verdict(lv: LevelResult) -> str:
    if lv.slo_met is None:
        return "-"
    return "pass" if lv.slo_met else "FAIL: " + "; ".join(lv.slo_failures)


def rows(result: BenchResult) -> list[list[str]]:
    """One row of cells per level, under head()."""
    return [_cells(lv, bool(result.slos)) for lv in result.levels]


def _cells(lv: LevelResult, slo: bool) -> list[str]:
    rate = lv.request_rate if isinstance(lv.request_rate, str) else _n(lv.request_rate, "g")
    return [
        rate,
        _n(lv.achieved_request_rate, ".2f"),
        str(lv.completed),
        str(lv.errors),
        _n(lv.send_lateness_p99_ms, ".2f"),
        _n(lv.in_flight_max, "d"),
        _n(lv.server_queue_mean_ms),
        _n(lv.p99_ttft_ms),
        _n(lv.median_tpot_ms),
        _n(lv.p99_e2el_ms),
        _n(lv.output_throughput),
        _n(lv.output_throughput_per_gpu),
        _n(lv.tokens_per_s_per_user),
    ] + ([_verdict(lv)] if slo else [])


SOURCES = {True: "EMULATED vLLM", False: "measured", None: "measured (engine not recorded)"}


def legend(result: BenchResult) -> str:
    """Where the figures came from, the schedule, and what the open-loop columns mean."""
    burst = result.levels[0].burstiness if result.levels else None
    return (
        f"{SOURCES[result.emulated]}, open loop (burstiness {_n(burst, 'g')}, seed "
        f"{result.seed}): send lateness = actual "
        "send − scheduled; in flight = most requests the client saw in flight at a send; server "
        "queue = the server's own mean queue time."
    )


def find_max_lines(result: BenchResult) -> list[str]:
    return [line.strip() for line in _find_max(result.find_max)] if result.find_max else []


def format_markdown(result: BenchResult) -> str:
    """The open-loop levels as a Markdown table (report --markdown), then find-max's answer."""
    columns = head(result)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(map(md_cell, cells)) + " |" for cells in rows(result)]
    lines += ["", legend(result)]
    if result.find_max is not None:
        lines += ["", *(f"- {line}" for line in find_max_lines(result))]
    return "\n".join(lines) + "\n"


def _limits(slos: dict[str, float]) -> str:
    return ", ".join(f"{k} ≤ {v:g} ms" for k, v in slos.items())
