"""`composegen report --html FILE`: one self-contained HTML page — inline CSS, plots as inline SVG
(plots.py), no script, no link, no image or font to fetch: opened from a pull request's artifacts or
an e-mail it looks the same offline.

Sections: provenance (hashes, image digest, emulated or not, raw files), KV capacity and per-rank
memory plots, the A/B Results table and config differences of each run against the first, the ladder
plot, the load-benchmark plot with its per-level table. Every plot is a
`<figure class="plot" data-plot="NAME">` holding one `<svg>`; a plot without data says so instead.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from html import escape
from typing import Any

from composegen.bench import deltas, opentext, viaedgetext
from composegen.bench.reports import BenchResult, ViaEdgeResult
from composegen.evidence import compare, plots
from composegen.evidence.reports.compare import CompareReport
from composegen.evidence.reports.runs import RunsReport
from composegen.evidence.runreport import PROVENANCE_HEAD, provenance_rows


@dataclass(frozen=True)
class CampaignHeading:
    """What a campaign's report opens with (campaign/reportheading.py reads it from the records):
    each run's role, in the runs' order, the decision with its why, and the Outcome sentences."""

    name: str
    roles: list[str]  # control / candidate / bracket, or primary / fallback
    decision: str  # promote, no-promotion, fallback or undecided
    profile: str | None = None  # the profile the decision names
    why: str | None = None
    decided_at: str | None = None
    outcome: list[str] = field(default_factory=list)

    def verdict(self) -> str:
        """One line: the decision, its profile and when; `undecided` names the command."""
        if self.decision == "undecided":
            flags = '--promote|--no-promotion|--fallback --why "…"'
            return f"undecided: `composegen campaign decide {self.name} {flags}` records one"
        named = f" {self.profile}" if self.profile else ""
        return f"{self.decision}{named} (decided {self.decided_at or 'at an unknown time'})"


def with_roles(report: RunsReport, roles: list[str]) -> RunsReport:
    """The runs labelled by their role in the campaign (`control 8192-131k`), not `8192-131k (1)`."""
    runs = [
        run.model_copy(update={"label": f"{role} {run.profile}"})
        for run, role in zip(report.runs, roles, strict=True)
    ]
    return report.model_copy(update={"runs": runs})


CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:1100px;padding:1em 2em;
color:#1d2125;background:#fff}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.6em 0;font-size:13px}th,td{border:1px solid #ccc;padding:3px 8px;text-align:left}
th{background:#f3f4f6}td.num{text-align:right;font-variant-numeric:tabular-nums}
figure.plot{margin:1em 0}figure.plot svg{width:100%;height:auto}figcaption{color:#555;font-size:13px}
.emulated{background:#fff3cd;border:1px solid #e0b100;padding:.6em 1em}.missing{color:#777;font-style:italic}
code{font-size:12px}.flag-yes{color:#b00020;font-weight:bold}
.decision{border:2px solid #1d4ed8;background:#eff6ff;padding:.6em 1em}
"""


MAX_ROWS = 1_000  # per-level rows a page shows; `report --json` and `--markdown` hold every level


def _capped(levels: list[Any], what: str) -> tuple[list[Any], str]:
    """LEVELS as a page shows them (the first MAX_ROWS), with the note saying so when cut."""
    note = f"The first {MAX_ROWS:,} of {len(levels):,} {what} shown; every one: `report --json`"
    cut = f'<p class="missing" data-rows-cut>{_code(note)} or --markdown.</p>'
    return levels[:MAX_ROWS], cut if len(levels) > MAX_ROWS else ""


def _table(head: list[str], rows: list[list[str]]) -> str:
    cells = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = "".join(
        "<tr>" + "".join(f"<td>{escape(str(c)).replace('`', '')}</td>" for c in row) + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{cells}</tr></thead><tbody>{body}</tbody></table>"


OUT_OF_RANGE = "not drawn: a figure is too large to plot (the tables below show it)"


def _plot(name: str, title: str, svg: str | None) -> str:
    if svg is None or svg == OUT_OF_RANGE:
        why = OUT_OF_RANGE if svg else "no run has these figures"
        return f'<p class="missing" data-missing-plot="{name}">{escape(title)}: {why}.</p>'
    return f'<figure class="plot" data-plot="{name}">{svg}<figcaption>{escape(title)}</figcaption></figure>'


def _comparison(result: CompareReport, a: str, b: str) -> str:
    """The A/B tables of run A against run B (their labels: a role and a profile in a campaign)."""
    rows = [
        [r.label, compare._value(r, "a"), compare._value(r, "b"), compare._change(r)]
        for r in result.rows
    ]
    flag = "flag-yes" if result.unexplained_capacity_change.flag else ""
    parts = [f"<h3>{escape(a)} vs {escape(b)}</h3>", _table(["Measurement", a, b, "Change"], rows)]
    parts.append(f'<p class="{flag}">{escape(compare._flag_line(result))}</p>')
    config = result.config
    diff_rows = [[c.path, repr(c.before), repr(c.after)] for c in config.functional]
    parts.append("<h4>Config differences</h4>")
    parts.append(
        _table(["Path", a, b], diff_rows) if diff_rows else "<p>No functional differences.</p>"
    )
    if identity := len(config.identity):
        parts.append(f"<p>{identity} identity-only differences (ports, names, labels).</p>")
    bench = result.bench
    if bench and bench.levels:
        parts.append("<h4>Load benchmark, per concurrency level</h4>")
        cell, (shown, cut) = deltas.cell, _capped(bench.levels, "rows")
        rows = [
            [r.level or str(r.concurrency), r.metric, cell(r.a), cell(r.b), deltas.change(r)]
            for r in shown
        ]
        parts.append(_table(["Concurrency", "Metric", a, b, "Change"], rows) + cut)
    notes = [*config.notes, *result.notes, *(bench.notes if bench else [])]
    parts += [f"<p>note: {escape(n)}</p>" for n in notes]
    return "".join(parts)


def _bench_tables(report: RunsReport) -> str:
    parts = []
    head = ["Concurrency", "Completed", "Errors", "req/s", "output tok/s", "TTFT median ms"]
    head += ["TTFT p99 ms", "TPOT median ms", "ITL p99 ms", "E2EL p99 ms"]
    figures = ["request_throughput", "output_throughput", "median_ttft_ms", "p99_ttft_ms"]
    figures += ["median_tpot_ms", "p99_itl_ms", "p99_e2el_ms"]
    for run in report.runs:
        if run.bench is None:
            continue
        levels, cut = _capped(run.bench.levels, "levels")
        rows = [
            [
                str(lv.concurrency) if lv.request_rate is None else lv.key(),
                str(lv.completed),
                str(lv.errors),
                *("-" if (v := getattr(lv, f)) is None else f"{v:,.2f}" for f in figures),
            ]
            for lv in levels
        ]
        sizes = f"{run.bench.input_tokens} input / {run.bench.output_tokens} output tokens"
        title = f"<h4>{escape(run.label)} ({sizes})</h4>"
        if run.bench.arrivals == "open":  # its own columns: rates, lateness, queueing, the SLO
            parts.append(title + _open_table(run.bench.model_copy(update={"levels": levels})) + cut)
            continue
        parts.append(title + _table(head, rows) + cut)
        parts.append(_via_edge(run.label, run.bench.via_edge))
    return "".join(parts)


def _open_table(result: BenchResult) -> str:
    notes = [opentext.legend(result), *opentext.find_max_lines(result)]
    table = _table(opentext.head(result), opentext.rows(result))
    return table + "".join(f"<p>{escape(n)}</p>" for n in notes)


def _via_edge(label: str, via: ViaEdgeResult | None) -> str:
    """`bench --via-edge`: both paths and what the edge adds, said where the figures came from."""
    if via is None:
        return ""
    title = f"<h4>{escape(label)}: through the edge and the operator door</h4>"
    where = f'<p class="{"emulated" if via.emulated else "source"}">{escape(viaedgetext.caption(via))}</p>'
    return title + where + _table(viaedgetext.HEAD, viaedgetext.rows(via))


def _drawn(plot: Callable[[RunsReport], str | None], report: RunsReport) -> str | None:
    """A bundle's figures are checked finite, not plausible: 1.7e308 overflows matplotlib's tick
    maths."""
    with warnings.catch_warnings():
        # numpy's overflow notes on the way to the error
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            return plot(report)
        except (OverflowError, ValueError):
            return OUT_OF_RANGE


def _code(html: str) -> str:
    """`x` as <code>x</code>: a command in a sentence reads as one, not between literal backticks."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html)


def _heading(heading: CampaignHeading) -> list[str]:
    """The decision with its why, then the Outcome: what a reader of a campaign wants first."""
    why = f"<p>Why: {escape(heading.why)}</p>" if heading.why else ""
    parts = [
        f'<div class="decision" data-decision="{escape(heading.decision)}">'
        f"<p><strong>Decision: {_code(escape(heading.verdict()))}</strong></p>{why}</div>"
    ]
    if heading.outcome:
        parts.append("<h2>Outcome</h2>")
        parts += [f"<p>{escape(line)}</p>" for line in heading.outcome if line.strip()]
    return parts


def render_html(report: RunsReport, heading: CampaignHeading | None = None) -> str:
    svgs = {name: (title, _drawn(fn, report)) for name, title, fn in plots.PLOTS}
    names = ", ".join(run.label for run in report.runs)
    title = f"campaign {heading.name}: {names}" if heading else names
    body = [f"<h1>composegen report: {escape(title)}</h1>"]
    body += _heading(heading) if heading else []
    if any(run.emulated for run in report.runs):
        emulated = ", ".join(run.label for run in report.runs if run.emulated)
        body.append(
            f'<p class="emulated"><strong>EMULATED vLLM</strong> ({escape(emulated)}): these figures exercise '
            "composegen and the criteria, not a real engine or model.</p>"
        )
    body += ["<h2>Provenance</h2>", _table(PROVENANCE_HEAD, provenance_rows(report))]
    body += ["<h2>KV capacity and memory</h2>", _plot("kv_capacity", *svgs["kv_capacity"])]
    body.append(_plot("memory_breakdown", *svgs["memory_breakdown"]))
    if report.comparisons:
        body.append("<h2>A/B results and config differences</h2>")
        first = report.runs[0].label
        body += [
            _comparison(comparison, first, run.label)
            for comparison, run in zip(report.comparisons, report.runs[1:], strict=True)
        ]
    body += ["<h2>Context ladder</h2>", _plot("ladder", *svgs["ladder"])]
    body += ["<h2>Load benchmark</h2>", _plot("bench", *svgs["bench"]), _bench_tables(report)]
    body.append(_plot("frontier", *svgs["frontier"]))
    raw = [[run.label, f.file, f.sha256, str(f.bytes)] for run in report.runs for f in run.raw]
    body += ["<h2>Raw files</h2>", _table(["Run", "File", "sha256", "Bytes"], raw)]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>composegen report: {escape(title)}</title><style>{CSS}</style></head>\n<body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )
