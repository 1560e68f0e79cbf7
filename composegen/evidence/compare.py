"""A/B comparison of two evidence bundles: the seed's Results table, config differences, and a flag
for a capacity change that KV bytes do not explain.

Rows, in the seed's order: min_rank_kv_gib, kv_cache_tokens, max_concurrency, peak_activation_gib,
weights_gib, gates ("passed/total" strings; delta = passed difference), largest_prompt_tokens,
largest_ttft_s, largest_prefill_tok_s, largest_decode_tok_s (the last three from the ladder row with
the largest API-reported prompt). delta = b − a; pct = delta / a × 100 rounded to 3 decimals, null
where the seed shows an absolute change only (concurrency, weights, gates) or a side is unknown.

Config differences: diff.compare of the two profiles' compose as rendered now from the project at
root (by the profile name each run recorded); a note says so when a profile's hash moved since its
run.

unexplained_capacity_change.flag: |kv_tokens_pct − kv_bytes_pct| / 100 > threshold, where bytes are
the minimum-rank KV GiB. The seed's +4.715% bytes vs +94.861% tokens is the case it exists for: more
tokens than the extra bytes can hold means cache geometry or engine accounting changed, not just
memory.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from composegen import render
from composegen.bench import deltas
from composegen.bench.reports import BenchDeltas
from composegen.diff import semantic
from composegen.diff.composeyaml import parse_compose_text
from composegen.errors import BadInput
from composegen.evidence import bundle as evidence
from composegen.evidence import comparability
from composegen.evidence.reports.bundle import LadderRow, LoadedRun
from composegen.evidence.reports.compare import (
    CapacityChange,
    CompareReport,
    CompareRow,
    CompareSide,
    ConfigDifferences,
)
from composegen.output import md_cell
from composegen.profiles import caches, resolve
from composegen.project import Project
from composegen.units import format_gib

Read = Callable[[LoadedRun], Any]


def _largest_row(doc: LoadedRun) -> LadderRow | None:
    rows = [
        r
        for r in (doc.ladder.targets if doc.ladder else [])
        if r.prompt_tokens is not None and r.finish_reason is not None
    ]
    return max(rows, key=lambda r: r.prompt_tokens or 0) if rows else None


def _gates(doc: LoadedRun) -> str | None:
    gates = doc.gates
    return f"{gates.passed}/{gates.total}" if gates else None


def _largest_prompt(doc: LoadedRun) -> int | None:
    return doc.ladder.largest_prompt_tokens if doc.ladder else None


def _s(name: str) -> Read:  # a figure of the startup report
    return lambda doc: getattr(doc.startup, name)


def _ladder(name: str) -> Read:  # a figure of the largest ladder row
    return lambda doc: None if (row := _largest_row(doc)) is None else getattr(row, name)


# (metric, label, unit, read, show pct)
METRICS: list[tuple[str, str, str, Read, bool]] = [
    ("min_rank_kv_gib", "Minimum-rank KV allocation", "GiB", _s("kv_cache_gib_min"), True),
    ("kv_cache_tokens", "Engine-reported GPU KV tokens", "tokens", _s("kv_cache_tokens"), True),
    ("max_concurrency", "Reported concurrency at max-model-len", "x", _s("max_concurrency"), False),
    ("peak_activation_gib", "Peak activation per rank", "GiB", _s("peak_activation_gib"), True),
    ("weights_gib", "Weight allocation per rank", "GiB", _s("weights_gib"), False),
    ("gates", "Functional gates", "passed/total", _gates, False),
    ("largest_prompt_tokens", "Largest actual prompt", "tokens", _largest_prompt, True),
    ("largest_ttft_s", "Largest-request TTFT", "s", _ladder("ttft_s"), True),
    (
        "largest_prefill_tok_s",
        "Largest-request effective prefill",
        "tok/s",
        _ladder("prefill_tok_s"),
        True,
    ),
    ("largest_decode_tok_s", "Largest-request decode", "tok/s", _ladder("decode_tok_s"), True),
]


def numeric(value: Any) -> bool:
    """An int or a float, not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _row(metric: str, label: str, unit: str, a: Any, b: Any, show_pct: bool) -> CompareRow:
    delta = pct = None
    if metric == "gates" and a and b:
        delta = int(b.split("/")[0]) - int(a.split("/")[0])
    elif numeric(a) and numeric(b):
        delta = b - a if isinstance(a, int) and isinstance(b, int) else round(b - a, 6)
        if show_pct and a != 0:
            pct = round((b - a) / abs(a) * 100, 3)
    return CompareRow(metric=metric, label=label, unit=unit, a=a, b=b, delta=delta, pct=pct)


def _pct(a: Any, b: Any) -> float | None:
    return round((b - a) / abs(a) * 100, 3) if numeric(a) and numeric(b) and a else None


def capacity_flag(doc_a: LoadedRun, doc_b: LoadedRun, threshold: float) -> CapacityChange:
    a, b = doc_a.startup, doc_b.startup
    bytes_pct = _pct(a.kv_cache_gib_min, b.kv_cache_gib_min)
    tokens_pct = _pct(a.kv_cache_tokens, b.kv_cache_tokens)
    flag = (
        None
        if bytes_pct is None or tokens_pct is None
        else abs(tokens_pct - bytes_pct) / 100 > threshold
    )
    return CapacityChange(
        flag=flag, kv_bytes_pct=bytes_pct, kv_tokens_pct=tokens_pct, threshold=threshold
    )


def config_differences(
    doc_a: LoadedRun, doc_b: LoadedRun, root: str | Path | Project
) -> ConfigDifferences:
    project = Project(Path(root)) if not isinstance(root, Project) else root
    out = ConfigDifferences(functional=[], identity=[], notes=[])
    sides = []
    for doc in (doc_a, doc_b):
        name = doc.profile.name
        try:
            r = resolve.load(project, name)
        except BadInput as exc:
            out.notes.append(
                f"profile {name} cannot be rendered now ({exc.message}); no config differences"
            )
            return out
        if r.hash != doc.profile.hash:
            out.notes.append(
                f"profile {name} changed since its run (hash {doc.profile.hash} -> {r.hash});"
                " differences are between the profiles as they are now"
            )
        sides.append((r, parse_compose_text(render.render(r), f"profile:{name}")))
    identity = [*sides[0][0].profile.identity, *sides[1][0].profile.identity]
    for change in semantic.compare(sides[0][1], sides[1][1], identity_paths=identity):
        if change.path == caches.KEY_PATH:  # it follows the flags it hashes: no variable of its own
            continue
        (out.functional if change.change_class == "functional" else out.identity).append(
            change.report()
        )
    return out


def served_model(doc: LoadedRun) -> str | None:
    """The model the engine served (its `non-default args` line), null when the log does not say."""
    model = (doc.startup.effective_args or {}).get("model")
    return model if isinstance(model, str) else None


def refuse_unlike(doc_a: LoadedRun, doc_b: LoadedRun) -> None:
    """BadInput (exit 2) when the two runs served different models or context lengths: not an
    A/B."""
    for what, a, b in (
        ("model", served_model(doc_a), served_model(doc_b)),
        ("max_model_len", doc_a.startup.max_model_len, doc_b.startup.max_model_len),
    ):
        if a is not None and b is not None and a != b:
            raise BadInput(
                f"compare: {what} differs ({doc_a.profile.name}: {a}, {doc_b.profile.name}: {b}); "
                "these runs are not an A/B of one configuration",
                hint="pass --force to compare them anyway",
            )


def picked(spec: str | Path | LoadedRun, doc: LoadedRun, root: str | Path | None) -> str | None:
    """A note naming the bundle a profile name stood for (its newest run), or None for a named
    (or loaded) run."""
    if root is None or isinstance(spec, LoadedRun) or Path(spec).is_dir():
        return None
    if (Path(root) / "runs" / str(spec)).is_dir():
        return None
    if not (Path(root) / "profiles" / f"{spec}.yaml").is_file():
        return None
    try:
        where = str(Path(doc.path).resolve().relative_to(Path(root).resolve()))
    except ValueError:
        where = doc.path
    return f"{spec}: picked its newest run, {where} (created {doc.created_at})"


def compare_runs(
    run_a: str | Path | LoadedRun,
    run_b: str | Path | LoadedRun,
    *,
    root: str | Path,
    threshold: float = 0.10,
    force: bool = True,
) -> CompareReport:
    """FORCE false (the `compare` command): refuse runs of different models or context lengths."""
    if not threshold >= 0:
        raise BadInput(f"compare: --threshold: must be ≥ 0, got {threshold}")
    doc_a, doc_b = (
        r if isinstance(r, LoadedRun) else evidence.load_run(r, root) for r in (run_a, run_b)
    )
    if not force:
        refuse_unlike(doc_a, doc_b)
    rows = [
        _row(metric, label, unit, read(doc_a), read(doc_b), show)
        for metric, label, unit, read, show in METRICS
    ]
    notes = [n for n in (picked(run_a, doc_a, root), picked(run_b, doc_b, root)) if n]
    len_a, len_b = doc_a.startup.max_model_len, doc_b.startup.max_model_len
    if len_a != len_b:
        notes.append(f"concurrency is at each run's own max-model-len ({len_a} vs {len_b})")
    elif len_a:
        rows[2].label = f"Reported concurrency at {len_a:,} tokens"
    for side, doc in (("a", doc_a), ("b", doc_b)):
        if doc.unknown:
            notes.append(
                f"{side} ({doc.profile.name}, source {doc.source}) does not know: {', '.join(doc.unknown)}"
            )
    notes += comparability.context_notes(doc_a, doc_b)
    config = config_differences(doc_a, doc_b, root)
    return CompareReport(
        a=_identity(doc_a),
        b=_identity(doc_b),
        rows=rows,
        config=config,
        comparability=comparability.label(doc_a, doc_b, len(config.functional)),
        unexplained_capacity_change=capacity_flag(doc_a, doc_b, threshold),
        notes=notes,
        # per-level load-benchmark deltas, null without
        bench=deltas.deltas(doc_a.bench, doc_b.bench) if doc_a.bench and doc_b.bench else None,
    )


def _identity(doc: LoadedRun) -> CompareSide:
    return CompareSide(
        run=doc.path,
        profile=doc.profile.name,
        hash=doc.profile.hash,
        source=doc.source,
        max_model_len=doc.startup.max_model_len,
        emulated=doc.emulated,
    )


# ---------------------------------------------------------------- output


def _value(row: CompareRow, side: str) -> str:
    v, unit = (row.a if side == "a" else row.b), row.unit
    if v is None:
        return "unknown"
    if isinstance(v, str):  # the gates' "passed/total"
        return v
    if unit == "tok/s":
        return f"{v:,.0f} tok/s" if v >= 1000 else f"{v:.2f} tok/s"
    return _SHOWN.get(unit, str)(v)


_SHOWN: dict[str, Callable[[Any], str]] = {
    "GiB": format_gib,
    "tokens": "{:,}".format,
    "x": "{:.2f}x".format,
    "s": "{:.3f} s".format,
}


def _change(row: CompareRow) -> str:
    delta, pct, unit = row.delta, row.pct, row.unit
    if delta is None:
        return "-"
    if row.metric == "gates":
        if delta != 0 or row.a != row.b:
            return f"{delta:+d} passed"
        passed, total = str(row.a).split("/")
        return "unchanged pass" if passed == total else "unchanged"
    if delta == 0:
        return "unchanged"
    pct_text = f"{pct:+.3f}%" if pct is not None else None
    if unit not in _SIGNED:  # timings: the seed reports them relative only
        return pct_text or f"{delta:+g} {unit}"
    absolute = _SIGNED[unit](delta)
    return f"{absolute} / {pct_text}" if pct_text else absolute


_SIGNED: dict[str, Callable[[Any], str]] = {
    "GiB": lambda delta: format_gib(delta, signed=True),
    "tokens": "{:+,}".format,
    "x": "{:+.2f}x".format,
}


def _headers(result: CompareReport) -> tuple[str, str]:
    """Column heads; an emulated side says so in its own head, which goes wherever the table is
    pasted."""
    a, b = result.a.profile, result.b.profile

    def head(name: str, side: str, emulated: bool) -> str:
        marks = ([side] if a == b else []) + (["EMULATED"] if emulated else [])
        return f"{name} ({', '.join(marks)})" if marks else name

    return head(a, "a", result.a.emulated), head(b, "b", result.b.emulated)


def _emulated_line(result: CompareReport) -> str | None:
    sides = [side for side, got in (("a", result.a), ("b", result.b)) if got.emulated]
    said = f"EMULATED vLLM in {' and '.join(sides)}: these figures exercise composegen, not a model"
    return said if sides else None


def _flag_line(result: CompareReport) -> str:
    cap = result.unexplained_capacity_change
    if cap.flag is None or cap.kv_bytes_pct is None or cap.kv_tokens_pct is None:
        return "unexplained capacity change: unknown (KV bytes or tokens missing on a side)"
    verdict = "YES" if cap.flag else "no"
    return (
        f"unexplained capacity change: {verdict} — KV bytes {cap.kv_bytes_pct:+.3f}% vs KV tokens "
        f"{cap.kv_tokens_pct:+.3f}% (threshold {cap.threshold * 100:g} points)"
    )


def _config_lines(result: CompareReport) -> list[str]:
    config = result.config
    lines = [f"functional config differences: {len(config.functional) or 'none'}"]
    for change in config.functional:
        lines.append(f"  {change.path}: {change.before!r} -> {change.after!r}")
    if config.identity:
        lines.append(f"identity-only differences: {len(config.identity)} (ports, names, labels)")
    return lines + [f"note: {n}" for n in config.notes]


def format_text(result: CompareReport) -> str:
    head_a, head_b = _headers(result)
    table = [("Measurement", head_a, head_b, "Change")]
    table += [(r.label, _value(r, "a"), _value(r, "b"), _change(r)) for r in result.rows]
    widths = [max(len(row[i]) for row in table) for i in range(4)]
    lines = [
        "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in table
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines[:0] = [n for n in (_emulated_line(result), result.comparability) if n]
    lines += ["", _flag_line(result), *_config_lines(result), *[f"note: {n}" for n in result.notes]]
    lines += deltas.format_lines(result.bench)
    return "\n".join(lines) + "\n"


def markdown_table(head_a: str, head_b: str, rows: list[CompareRow]) -> list[str]:
    """The Results table; names and paths from bundles are made Markdown-inert."""
    lines = [
        f"| Measurement | {md_cell(head_a)} | {md_cell(head_b)} | Change |",
        "|---|---|---|---|",
    ]
    return lines + [
        f"| {r.label} | {_value(r, 'a')} | {_value(r, 'b')} | {_change(r)} |" for r in rows
    ]


def bench_markdown(bench: BenchDeltas | None) -> list[str]:
    """The per-level bench deltas as a Markdown table and its notes (a campaign's record)."""
    return deltas.format_lines(bench, markdown=True)


def format_markdown(result: CompareReport) -> str:
    lines = markdown_table(*_headers(result), result.rows)
    for said in (result.comparability, _emulated_line(result)):
        lines[:0] = [f"> **{said}**", ""] if said else []
    lines += ["", f"**{_flag_line(result)}**", ""]
    lines += [f"- {md_cell(line.strip())}" for line in _config_lines(result)]
    lines += [f"- note: {md_cell(n)}" for n in result.notes]
    lines += deltas.format_lines(result.bench, markdown=True)
    return "\n".join(lines) + "\n"
