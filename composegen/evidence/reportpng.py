"""The report's summary as one PNG, written next to the HTML page: chat tools preview an image, not
HTML. What it shows: the title (the campaign and its decision, when a campaign), each run's
engine-reported KV capacity (a bar drawn red when the run failed a gate; the title names each run's
gates and the failed ones), and — when the runs have them — the ladder's TTFT per prompt size and the
benchmark's output throughput per concurrency. Every figure's source is on the image: `EMULATED vLLM`
when any run was emulated, else "engine-reported"."""

from __future__ import annotations

import io
import warnings
from typing import Any

from composegen.evidence.plots import _text
from composegen.evidence.reportpage import CampaignHeading
from composegen.evidence.reports.runs import RunsReport, RunSummary

DPI = 100
PASSED, FAILED = "#2563eb", "#dc2626"  # a KV bar's colour: every gate passed (or none run), or not
OUT_OF_RANGE = "plots not drawn: a figure is too large to plot (the HTML page's tables show it)"


def _kv(ax: Any, report: RunsReport) -> None:
    labels = [run.label for run in report.runs]
    tokens = [run.startup.get("kv_cache_tokens") or 0 for run in report.runs]
    colours = [FAILED if run.failed_gates else PASSED for run in report.runs]
    bars = ax.barh(range(len(labels)), tokens, color=colours)
    ax.set_yticks(range(len(labels)), [_text(x) for x in labels])
    ax.invert_yaxis()
    ax.bar_label(bars, labels=[f"{t:,}" if t else "not reported" for t in tokens], padding=3)
    ax.set_xlabel("KV cache tokens (engine-reported)")
    ax.set_xlim(0, max(tokens or [1]) * 1.3 or 1)


# a run's part -> (its points to draw, x label, y label), the second row of plots
LINES: dict[str, tuple[Any, str, str]] = {
    "ladder": (
        lambda run: [(t.target, t.ttft_s) for t in run.ladder.targets if t.ok and t.ttft_s],
        "prompt tokens",
        "TTFT s (measured)",
    ),
    "bench": (
        lambda run: [(lv.concurrency, lv.output_throughput or 0) for lv in run.bench.levels],
        "concurrency",
        "output tok/s (measured)",
    ),
}


def _lines(ax: Any, report: RunsReport, part: str) -> bool:
    """One line per run that has PART; whether any was drawn."""
    points, xlabel, ylabel = LINES[part]
    runs = [(r, points(r)) for r in report.runs if getattr(r, part)]
    drawn = [ax.plot(*zip(*xy, strict=True), "o-", label=_text(r.label)) for r, xy in runs if xy]
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    return bool(drawn)


def _title(report: RunsReport, heading: CampaignHeading | None) -> str:
    if heading is None:
        head = "composegen report: " + ", ".join(run.label for run in report.runs)
    else:
        head = f"campaign {heading.name} — decision: {heading.verdict()}"
    # where the figures came from: each bundle's source (a live stack, a recorded log)
    head += "\nsource: " + ", ".join(sorted({run.source for run in report.runs}))
    if any(run.emulated for run in report.runs):
        head += " — EMULATED vLLM: figures exercise composegen, not a real engine"
    gates = [_gates(run) for run in report.runs if run.gates]
    return _text(head + ("\ngates: " + " · ".join(gates) if gates else ""))


def _gates(run: RunSummary) -> str:
    failed = f" FAILED: {', '.join(run.failed_gates)}" if run.failed_gates else ""
    return f"{run.label} {run.gates}{failed}"


def render_png(report: RunsReport, heading: CampaignHeading | None = None) -> bytes:
    """The summary image (PNG bytes). A bundle's figures are checked finite, not plausible: one
    that overflows matplotlib's tick maths (1.7e308) leaves the plots out and says so."""
    title = _title(report, heading)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy's overflow notes on the way
        for plots in (True, False):
            try:
                return _draw(report, title if plots else f"{title}\n{OUT_OF_RANGE}", plots)
            except (OverflowError, ValueError):
                continue
    raise AssertionError("unreachable: a figure without plots draws")  # pragma: no cover


def _draw(report: RunsReport, title: str, plots: bool) -> bytes:
    from matplotlib.figure import Figure  # ~0.3 s: only `report --html` pays it

    extra = [part for part in LINES if plots and any(getattr(run, part) for run in report.runs)]
    rows = len(report.runs) if plots else 0
    fig = Figure(figsize=(10, 1.2 + 0.45 * rows + 3.2 * bool(extra) + bool(plots)), dpi=DPI)
    if plots:
        grid = fig.add_gridspec(2 if extra else 1, max(1, len(extra)))
        _kv(fig.add_subplot(grid[0, :]), report)
        for column, part in enumerate(extra):
            ax = fig.add_subplot(grid[1, column])
            if _lines(ax, report, part):
                ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=11)
    if plots:
        fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": "composegen"})
    return buffer.getvalue()
