"""Per-level load-benchmark deltas of two evidence bundles (the `bench` part of `composegen
compare`).

`deltas(a, b) -> BenchDeltas` of two runs' BenchResult: one BenchDelta per figure of each level
both runs measured (in order), the levels only one run measured, and notes. delta = b − a; pct =
delta / a × 100 (3 decimals). A note says when the two sweeps asked for different prompt or output
sizes: their figures are then not like for like. Open-loop levels (paired
by rate) also compare the rate achieved, the send lateness and the queueing, and a note gives each
level's SLO verdict in both runs.
"""

from __future__ import annotations

from composegen.bench.reports import BenchDelta, BenchDeltas, BenchResult, LevelResult

COMPARED = (
    ("request_throughput", "req/s"),
    ("output_throughput", "tok/s"),
    ("median_ttft_ms", "ms"),
    ("p99_ttft_ms", "ms"),
    ("median_tpot_ms", "ms"),
    ("p99_itl_ms", "ms"),
    ("p99_e2el_ms", "ms"),
)
OPEN_COMPARED = (  # what only an open-loop level has: did the schedule hold, what queued
    ("achieved_request_rate", "req/s"),
    ("send_lateness_p99_ms", "ms"),
    ("in_flight_mean", "requests"),
    ("server_queue_mean_ms", "ms"),
)


def _delta(lv_a: LevelResult, lv_b: LevelResult, metric: str, unit: str) -> BenchDelta:
    va, vb = getattr(lv_a, metric), getattr(lv_b, metric)
    delta = pct = None
    if va is not None and vb is not None:
        delta = round(vb - va, 6)
        pct = round(delta / abs(va) * 100, 3) if va else None
    return BenchDelta(
        concurrency=lv_a.concurrency,
        level=None if lv_a.request_rate is None else lv_a.key(),
        metric=metric,
        unit=unit,
        a=va,
        b=vb,
        delta=delta,
        pct=pct,
    )


def deltas(a: BenchResult, b: BenchResult) -> BenchDeltas:
    rows = []
    # closed levels pair by concurrency, open ones by rate (all of them have concurrency 0)
    levels_a = {lv.key(): lv for lv in a.levels}
    levels_b = {lv.key(): lv for lv in b.levels}
    paired = [(levels_a[k], levels_b[k]) for k in levels_a if k in levels_b]
    for lv_a, lv_b in paired:
        figures = COMPARED + (OPEN_COMPARED if lv_a.request_rate is not None else ())
        rows += [_delta(lv_a, lv_b, metric, unit) for metric, unit in figures]
    notes = []
    if (a.input_tokens, a.output_tokens) != (b.input_tokens, b.output_tokens):
        notes.append(
            f"bench sizes differ: a {a.input_tokens}/{a.output_tokens}, b {b.input_tokens}/{b.output_tokens} "
            "input/output tokens; the deltas are not like for like"
        )
    if bool(a.emulated) != bool(b.emulated):
        notes.append("one bench ran on the emulator, the other on vLLM")
    notes += _slo_notes(a, b, paired)
    return BenchDeltas(
        levels=rows,
        only_a=[lv.concurrency for lv in _only(levels_a, levels_b) if lv.request_rate is None],
        only_b=[lv.concurrency for lv in _only(levels_b, levels_a) if lv.request_rate is None],
        only_a_rates=[lv.key() for lv in _only(levels_a, levels_b) if lv.request_rate is not None],
        only_b_rates=[lv.key() for lv in _only(levels_b, levels_a) if lv.request_rate is not None],
        notes=notes,
    )


def _only(mine: dict[str, LevelResult], theirs: dict[str, LevelResult]) -> list[LevelResult]:
    return [lv for key, lv in mine.items() if key not in theirs]


def _verdict(lv: LevelResult) -> str:
    return "-" if lv.slo_met is None else "pass" if lv.slo_met else "FAIL"


def _slo_notes(
    a: BenchResult, b: BenchResult, paired: list[tuple[LevelResult, LevelResult]]
) -> list[str]:
    """Each paired level's SLO verdict in a and b, in one note."""
    judged = [(x, y) for x, y in paired if x.slo_met is not None or y.slo_met is not None]
    if not judged:
        return []
    limits = a.slos or b.slos or {}
    said = ", ".join(f"{k} ≤ {v:g} ms" for k, v in limits.items())
    notes = [
        f"SLO ({said}) per level, a / b: "
        + ", ".join(f"{x.key()} {_verdict(x)} / {_verdict(y)}" for x, y in judged)
    ]
    if a.slos != b.slos:
        notes.append(f"the SLOs differ: a {a.slos}, b {b.slos}; the verdicts are not like for like")
    return notes


def cell(value: float | None) -> str:
    return "unknown" if value is None else f"{value:,.2f}"


def change(row: BenchDelta) -> str:
    if row.delta is None:
        return "-"
    return f"{row.delta:+,.2f}" + (f" / {row.pct:+.3f}%" if row.pct is not None else "")


def _open(result: BenchDeltas) -> bool:
    """Open-loop levels are named by rate (r2, r4): the table's first column says "level"."""
    return any(r.level for r in result.levels)


def format_lines(result: BenchDeltas | None, markdown: bool = False) -> list[str]:
    if result is None:
        return []
    if markdown:
        level = "Level" if _open(result) else "Concurrency"
        lines = ["", f"| {level} | Metric | a | b | Change |", "|---|---|---|---|---|"]
        lines += [
            f"| {r.level or r.concurrency} | {r.metric} | {cell(r.a)} | {cell(r.b)} | {change(r)} |"
            for r in result.levels
        ]
        return lines + [f"- note: {n}" for n in result.notes]
    table = [("level" if _open(result) else "conc", "metric", "a", "b", "change")]
    table += [
        (r.level or str(r.concurrency), r.metric, cell(r.a), cell(r.b), change(r))
        for r in result.levels
    ]
    widths = [max(len(row[i]) for row in table) for i in range(5)]
    lines = ["", "bench, per level:" if _open(result) else "bench, per concurrency level:"]
    lines += [
        "  " + "  ".join(text.ljust(widths[i]) for i, text in enumerate(row)).rstrip()
        for row in table
    ]
    for side, only, rates in (
        ("a", result.only_a, result.only_a_rates),
        ("b", result.only_b, result.only_b_rates),
    ):
        if only:
            lines.append(f"  measured only in {side}: concurrency {', '.join(map(str, only))}")
        if rates:
            lines.append(f"  measured only in {side}: {', '.join(rates)} (open loop)")
    return lines + [f"note: {n}" for n in result.notes]
