"""`composegen report RUN...`: what the evidence runs hold, gathered once for the HTML page
(reportpage.py) and the Markdown pull-request comment (format_markdown here).
`gather` loads every bundle and compares every later run with the first.
"""

from __future__ import annotations

import collections
from pathlib import Path

from composegen.bench import opentext, stats, viaedgetext
from composegen.errors import BadInput
from composegen.evidence import bundle as evidence
from composegen.evidence import compare, record
from composegen.evidence.reports.bundle import LoadedRun
from composegen.evidence.reports.ladder import LadderResult
from composegen.evidence.reports.runs import RawFile, RunsReport, RunSummary
from composegen.output import md_cell

# RunSummary.startup: the startup figures a run's summary shows, each a typed field of StartupFacts
STARTUP_KEYS = (
    "vllm_version",
    "max_model_len",
    "kv_cache_tokens",
    "kv_cache_gib_min",
    "kv_cache_gib_per_rank",
    "weights_gib",
    "peak_activation_gib",
    "cuda_graph_gib",
    "max_concurrency",
)

# RunSummary fields the bundle holds under the same name
BUNDLE_KEYS = ["source", "created_at", "composegen_version", "image_digest", "model_revision"]
BUNDLE_KEYS += ["compose_sha256", "emulated", "unknown", "bench"]


def _labels(docs: list[LoadedRun]) -> list[str]:
    names = [doc.profile.name for doc in docs]
    counts = collections.Counter(names)  # linear in the number of runs
    return [name if counts[name] == 1 else f"{name} ({i + 1})" for i, name in enumerate(names)]


def _summary(doc: LoadedRun, label: str) -> RunSummary:
    gates = doc.gates
    return RunSummary(
        run=doc.path,
        label=label,
        profile=doc.profile.name,
        hash=doc.profile.hash,
        **{key: getattr(doc, key) for key in BUNDLE_KEYS},
        raw=[RawFile.model_validate(entry.model_dump(exclude_unset=True)) for entry in doc.raw],
        startup={key: getattr(doc.startup, key) for key in STARTUP_KEYS},
        gates=f"{gates.passed}/{gates.total}" if gates else None,
        failed_gates=[g.name for g in gates.gates if not g.passed] if gates else [],
        ladder=record.load_part(doc, "ladder", LadderResult),
    )


def gather(specs: list[str], *, root: str | Path) -> RunsReport:
    if not specs:
        raise BadInput("report: give one or more runs (runs/<run> or a bundle path)")
    docs = [evidence.load_run(spec, root) for spec in specs]
    runs = [_summary(doc, label) for doc, label in zip(docs, _labels(docs), strict=True)]
    comparisons = [compare.compare_runs(docs[0], doc, root=root) for doc in docs[1:]]
    return RunsReport(runs=runs, comparisons=comparisons)


# ---------------------------------------------------------------- Markdown


def _short(value: str | None, n: int = 16) -> str:
    return "unknown" if not value else value.removeprefix("sha256:")[:n]


def provenance_rows(report: RunsReport) -> list[list[str]]:
    """One row per run under PROVENANCE_HEAD."""
    return [
        [
            *(run.label, run.hash, _short(run.image_digest), _short(run.compose_sha256)),
            *(_short(run.model_revision, 12), run.source, "EMULATED" if run.emulated else "no"),
            run.created_at,
        ]
        for run in report.runs
    ]


PROVENANCE_HEAD = [
    "Run",
    "Profile hash",
    "Image digest",
    "Compose sha256",
    "Revision",
    "Source",
    "Emulated",
    "Created",
]


def _md_table(head: list[str], rows: list[list[str]]) -> list[str]:
    """Cells are text from bundles: a `|` or a newline cannot end a cell, `![..](..)` cannot become
    an image."""
    rows = [[md_cell(c) for c in r] for r in rows]
    return [
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
        *("| " + " | ".join(r) + " |" for r in rows),
    ]


def _ladder_md(run: RunSummary) -> list[str]:
    if run.ladder is None:
        return []
    show = lambda v, fmt: "-" if v is None else format(v, fmt)  # noqa: E731
    rows = [
        [
            f"{row.target:,}",
            show(row.prompt_tokens, ",d"),
            show(row.ttft_s, ".3f"),
            show(row.prefill_tok_s, ",.0f"),
            show(row.decode_tok_s, ".2f"),
            "ok" if row.ok else f"FAIL: {row.reason}",
        ]
        for row in run.ladder.targets
    ]
    head = ["Target", "Prompt tokens", "TTFT s", "Prefill tok/s", "Decode tok/s", "Result"]
    return ["", f"**Context ladder: {md_cell(run.label)}**", "", *_md_table(head, rows)]


def format_markdown(report: RunsReport) -> str:
    lines = ["## composegen report", ""]
    if any(run.emulated for run in report.runs):
        lines += [
            "> **EMULATED vLLM** in at least one run: the figures exercise composegen, not a model.",
            "",
        ]
    lines += ["### Provenance", "", *_md_table(PROVENANCE_HEAD, provenance_rows(report))]
    for comparison in report.comparisons:
        a, b = md_cell(comparison.a.profile), md_cell(comparison.b.profile)
        lines += ["", f"### {a} vs {b}", "", compare.format_markdown(comparison)]
    for run in report.runs:
        lines += _ladder_md(run)
        if run.bench is not None:
            # an open loop's table has its own columns (rate asked and achieved, lateness, SLO)
            table = (opentext if run.bench.arrivals == "open" else stats).format_markdown(run.bench)
            lines += ["", f"**Load benchmark: {md_cell(run.label)}**", "", table.rstrip()]
            if run.bench.via_edge is not None:
                lines += ["", viaedgetext.format_markdown(run.bench.via_edge).rstrip()]
    lines += ["", "_Plots: `composegen report --html FILE` (one self-contained page)._"]
    return "\n".join(lines) + "\n"
