"""Issue 49.6: `report` of a bundle of thousands of bench levels, checked by what it does, not by a
clock (bench/bench_report_html.py times it: docs/benchmarks.md). Each bundle is read once; its
evidence.json is checked a depth at a time (record._fine), the entry-by-entry walk only naming a
problem found; the page shows at most MAX_ROWS per-level rows, saying so, and draws a front of
thousands as a line; the report itself keeps every level (what --json prints)."""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter

import pytest

from composegen.errors import BadInput
from composegen.evidence import bundle, record, reportpage, runreport
from tests.support.bench_bundles import inflated, shared_bundles

LEVELS = 1_500


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    return shared_bundles(tmp_path_factory)


def _inflated(project, runs, tmp_path):
    """Copies of RUNS whose bench has LEVELS levels, as `bench` would have written it."""
    report = runreport.gather(list(map(str, runs)), root=project.root)
    copies = []
    for run, summary in zip(runs, report.runs, strict=True):
        copy = shutil.copytree(run, tmp_path / run.name)
        doc = json.loads((copy / "evidence.json").read_text())
        assert summary.bench is not None
        doc["bench"] = inflated(summary.bench, LEVELS).model_dump(mode="json", by_alias=True)
        (copy / "evidence.json").write_text(json.dumps(doc))
        copies.append(str(copy))
    return copies


def test_a_report_of_1500_levels_reads_once_checks_in_bulk_and_says_what_the_page_cut(
    bundles, tmp_path, monkeypatch
):
    project, runs = bundles
    big = _inflated(project, runs, tmp_path)
    calls: Counter[str] = Counter()
    for module, name in ((record, "_walk"), (bundle, "load_run")):
        real = getattr(module, name)

        def counted(*args, _real=real, _name=name, **kwargs):
            calls.update([_name])
            return _real(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)
    report = runreport.gather(big, root=project.root)
    # two bundles read once each (not again for the comparison), no value visited one by one
    assert calls == Counter(load_run=2)
    assert [len(run.bench.levels) for run in report.runs if run.bench] == [LEVELS, LEVELS]
    assert len(report.comparisons[0].bench.levels) == 7 * LEVELS  # 7 figures per level

    html = reportpage.render_html(report)
    cut = re.findall(r"<p class=\"missing\" data-rows-cut>([^<]*)", html)
    assert cut == [
        f"The first {reportpage.MAX_ROWS:,} of {7 * LEVELS:,} rows shown; every one: ",
        *[f"The first {reportpage.MAX_ROWS:,} of {LEVELS:,} levels shown; every one: "] * 2,
    ]
    assert html.count("<tr>") < 3 * reportpage.MAX_ROWS + 50  # three capped tables, a few small
    frontier = html[html.index('data-plot="frontier"') :]
    assert (
        frontier.count("<use ") < 500
    )  # a front of ~1,500 points: a line, not a marker each (glyphs are <use> too)

    # damage deep in a big bundle is still found, and named by the walk
    doc = json.loads((tmp_path / runs[1].name / "evidence.json").read_text())
    doc["bench"]["levels"][LEVELS - 1]["p99_itl_ms"] = float("nan")
    with pytest.raises(BadInput, match=rf"bench\.levels\.{LEVELS - 1}\.p99_itl_ms: nan is not"):
        record.check_document(doc, "evidence.json")
    assert calls["_walk"] > 0
