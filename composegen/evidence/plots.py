"""The report's plots, drawn by matplotlib's SVG backend and returned as inline `<svg>` text.

Only `composegen report` imports this module (matplotlib costs ~0.3 s to import: never on render,
diff or validate paths). Figures are made with matplotlib.figure.Figure directly (no pyplot, no
global state); text is drawn as paths (svg.fonttype "path") so the page needs no font; the SVG's
date metadata is left out and its element ids salted per plot, so two plots on one page never share
an id and the same data gives the same SVG. Each function returns None when no run has the data it
plots.
"""

from __future__ import annotations

import io
import re
from typing import Any

from composegen.bench.frontier import pareto
from composegen.evidence.reports.runs import RunsReport

WIDTH = 9.0  # inches; the page scales the SVG to its column
MAX_TICKS = 16  # a tick and marker per point up to this many (each laid out or drawn)


def _figure(rows: int = 1, cols: int = 1, height: float = 3.4) -> tuple[Any, list[Any]]:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(WIDTH, height * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False)
    return fig, [ax for row in axes for ax in row]


def _svg(fig: Any, name: str) -> str:
    import matplotlib

    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "path", "svg.hashsalt": f"composegen-{name}"}):
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    return _scoped(text[text.index("<svg") :], name)


_ID_REFS = re.compile(r'(\bid="|href="#|url\(#)([^")]+)')


def _scoped(svg: str, name: str) -> str:
    """Every id (and every reference to one) prefixed with the plot's name: matplotlib numbers its
    elements and glyphs the same way in every figure, and ids must be unique on the page."""
    return _ID_REFS.sub(lambda m: f"{m.group(1)}{name}-{m.group(2)}", svg)


def _text(label: str) -> str:
    """A bundle's name as matplotlib text: `$…$` would be mathtext (parsed, and an unbalanced `$` is
    an error), so every `$` is escaped and the name is drawn as written (reportpng's too)."""
    return label.replace("$", r"\$")


def _thousands(value: float, _position: object = None) -> str:
    return f"{value / 1000:g}k" if abs(value) >= 1000 else f"{value:g}"


def kv_capacity(report: RunsReport) -> str | None:
    from matplotlib.ticker import MaxNLocator

    runs = [r for r in report.runs if r.startup.get("kv_cache_tokens") is not None]
    if not runs:
        return None
    fig, (tokens, gib) = _figure(1, 2)
    labels = [_text(r.label) for r in runs]
    values = [r.startup["kv_cache_tokens"] for r in runs]
    bars = tokens.barh(labels, values, color="#4c72b0")
    tokens.bar_label(bars, labels=[f"{v:,}" for v in values], padding=3)
    tokens.set_title("Engine-reported GPU KV tokens")
    tokens.xaxis.set_major_formatter(_thousands)
    tokens.xaxis.set_major_locator(MaxNLocator(5))
    tokens.invert_yaxis()
    tokens.margins(x=0.3)
    sizes = [r.startup.get("kv_cache_gib_min") or 0 for r in runs]
    bars = gib.barh(labels, sizes, color="#55a868")
    gib.bar_label(bars, labels=[f"{v:.2f} GiB" for v in sizes], padding=3)
    gib.set_title("Minimum-rank KV allocation (GiB)")
    gib.invert_yaxis()
    gib.margins(x=0.3)
    return _svg(fig, "kv_capacity")


def memory_breakdown(report: RunsReport) -> str | None:
    bars: list[tuple[str, float, float, float]] = []  # (run · rank, weights, activation, KV)
    parts = ("weights", "#8172b3"), ("activation", "#c44e52"), ("KV cache", "#55a868")
    for run in report.runs:
        s = run.startup
        per_rank = s.get("kv_cache_gib_per_rank") or (
            [s["kv_cache_gib_min"]] if s.get("kv_cache_gib_min") else []
        )
        if s.get("weights_gib") is None and not per_rank:
            continue
        for rank, kv in enumerate(per_rank or [0.0]):
            name = f"{_text(run.label)} · rank {rank}" if len(per_rank) > 1 else _text(run.label)
            bars.append(
                (name, s.get("weights_gib") or 0.0, s.get("peak_activation_gib") or 0.0, kv or 0.0)
            )
    if not bars:
        return None
    fig, (ax,) = _figure(height=max(2.4, 0.55 * len(bars) + 1.2))
    names = [b[0] for b in bars]
    left = [0.0] * len(bars)
    for i, (part, color) in enumerate(parts):
        widths: list[float] = [float(b[i + 1]) for b in bars]
        drawn = ax.barh(names, widths, left=left, color=color, label=part)
        # a narrow segment is labelled past the bar
        wide = [f"{w:.2f}" if w > 4 else "" for w in widths]
        ax.bar_label(drawn, labels=wide, label_type="center", fontsize=8)
        left = [a + w for a, w in zip(left, widths, strict=True)]
    for y, (bar, end) in enumerate(zip(bars, left, strict=True)):
        ax.text(end + 1, y, f"activation {bar[2]:.2f}", va="center", fontsize=8)
    ax.margins(x=0.18)
    ax.invert_yaxis()
    ax.set_xlabel("GiB per rank")
    ax.set_title("Per-rank GPU memory: weights / peak activation / KV cache")
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.08), ncols=3, fontsize=8, frameon=False)
    return _svg(fig, "memory_breakdown")


def ladder(report: RunsReport) -> str | None:
    runs = [
        r for r in report.runs if r.ladder and any(row.prompt_tokens for row in r.ladder.targets)
    ]
    if not runs:
        return None
    fig, axes = _figure(1, 3)
    for key, ax, title in zip(
        ("ttft_s", "prefill_tok_s", "decode_tok_s"),
        axes,
        ("TTFT (s)", "Effective prefill (tok/s)", "Decode (tok/s)"),
        strict=True,
    ):
        for run in runs:
            points = sorted(
                (row.prompt_tokens, getattr(row, key))
                for row in run.ladder.targets  # type: ignore[union-attr]
                if row.prompt_tokens is not None and getattr(row, key) is not None
            )
            if points:
                ax.plot(*zip(*points, strict=True), marker="o", label=_text(run.label))
        ax.set_title(title)
        ax.set_xlabel("prompt tokens")
        ax.xaxis.set_major_formatter(_thousands)
        ax.set_ylim(bottom=0)  # from 0: a 1-2 % difference must not look like a crossing
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    return _svg(fig, "ladder")


def _closed(run: Any) -> list[Any]:
    """A run's closed-loop levels (open-loop ones have no concurrency to plot against)."""
    return [lv for lv in run.bench.levels if lv.request_rate is None] if run.bench else []


def bench(report: RunsReport) -> str | None:
    runs = [r for r in report.runs if _closed(r)]
    if not runs:
        return None
    fig, axes = _figure(1, 3)
    throughput, ttft, tpot = axes
    for run in runs:
        levels = sorted(_closed(run), key=lambda lv: lv.concurrency)
        conc = [lv.concurrency for lv in levels]
        marker = "o" if len(conc) <= MAX_TICKS else None  # thousands of levels: a line
        line = throughput.plot(
            conc, [lv.output_throughput for lv in levels], marker=marker, label=_text(run.label)
        )[0]
        for ax, metric in ((ttft, "ttft"), (tpot, "tpot")):
            for stat, style in (("median", "-"), ("p99", ":")):
                values = [getattr(lv, f"{stat}_{metric}_ms") for lv in levels]
                points = [(c, v) for c, v in zip(conc, values, strict=True) if v is not None]
                ax.plot(
                    [p[0] for p in points],
                    [p[1] for p in points],
                    style,
                    marker=marker,
                    color=line.get_color(),
                    label=f"{_text(run.label)} {stat}",
                )
    throughput.set_title("Output throughput (tok/s)")
    ttft.set_title("TTFT median / p99 (ms)")
    tpot.set_title("TPOT median / p99 (ms)")
    from matplotlib.ticker import FixedLocator, NullLocator

    levels = sorted({lv.concurrency for run in runs for lv in _closed(run)})
    for ax in axes:
        ax.set_xlabel("concurrency")
        ax.set_xscale("log", base=2)
        if len(levels) <= MAX_TICKS:  # each level its tick; thousands of labels: matplotlib's own
            ax.xaxis.set_major_locator(FixedLocator(levels))
            ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter("{x:g}")
        ax.set_ylim(bottom=0)  # from 0: a 1-2 % difference must not look like a crossing
        ax.grid(alpha=0.3)
    throughput.legend(fontsize=8)
    ttft.legend(fontsize=7)
    return _svg(fig, "bench")


def _pairs(run: Any) -> list[tuple[float, float]]:
    """(output tok/s per GPU, tok/s per user) of every level; figured from the level when a bundle
    predates the fields (its GPUs unknown: 1)."""
    gpus = max(run.bench.gpus or 1, 1)
    pairs = []
    for lv in run.bench.levels:
        per_gpu = lv.output_throughput_per_gpu
        per_user = lv.tokens_per_s_per_user
        if per_gpu is None:
            per_gpu = lv.output_throughput / gpus
        if per_user is None and lv.median_tpot_ms:
            per_user = 1000 / lv.median_tpot_ms
        if per_user is not None and lv.completed:
            pairs.append((per_gpu, per_user))
    return pairs


def frontier(report: RunsReport) -> str | None:
    """Throughput per GPU against interactivity, every run on one chart, its Pareto front drawn
    and its dominated levels hollow: two configurations compared at any operating point."""
    runs = [(r, _pairs(r)) for r in report.runs if r.bench]
    runs = [(r, pairs) for r, pairs in runs if pairs]
    if not runs:
        return None
    fig, (ax,) = _figure(height=4.2)
    for run, pairs in runs:
        on_front = pareto(pairs)
        front = sorted(p for p, keep in zip(pairs, on_front, strict=True) if keep)
        line = ax.plot(
            *zip(*front, strict=True),
            marker="o" if len(front) <= MAX_TICKS else None,  # thousands: a line through them
            label=f"{_text(run.label)}" + (" (EMULATED)" if run.emulated else "") + ": front",
        )[0]
        rest = [p for p, keep in zip(pairs, on_front, strict=True) if not keep]
        if rest:
            ax.scatter(
                *zip(*rest, strict=True),
                facecolors="none",
                edgecolors=line.get_color(),
                label=f"{_text(run.label)}: dominated levels",
            )
    kind = " — EMULATED vLLM" if any(run.emulated for run, _ in runs) else " (measured)"
    ax.set_title("Throughput–interactivity frontier" + kind)
    ax.set_xlabel("output tokens/s per GPU")
    ax.set_ylabel("tokens/s per user (1000 / median TPOT)")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _svg(fig, "frontier")


PLOTS = (
    ("kv_capacity", "KV capacity", kv_capacity),
    ("memory_breakdown", "Per-rank memory", memory_breakdown),
    ("ladder", "Context ladder", ladder),
    ("bench", "Throughput and latency under load", bench),
    ("frontier", "Throughput per GPU against tokens per user", frontier),
)
