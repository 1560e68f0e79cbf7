"""report (Markdown, JSON, self-contained HTML) and compare's bench deltas, on two real bundles: the
seed's recorded startup logs with a ladder and a bench measured on the emulator. The page in a real
browser: test_report_browser.py."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

from composegen.evidence import compare, plots, reportpage, runreport
from composegen.evidence.reports.runs import RunsReport
from tests.support.bench_bundles import inflated, shared_bundles
from tests.support.cli import run_cli

PLOT_NAMES = ["kv_capacity", "memory_breakdown", "ladder", "bench", "frontier"]


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    return shared_bundles(tmp_path_factory)


def _cli(project, *args):
    return run_cli("--root", str(project.root), *args, timeout=180)


def test_markdown_for_a_pull_request(bundles):
    project, runs = bundles
    res = _cli(project, "report", *map(str, runs), "--markdown")
    assert res.returncode == 0, res.stderr
    text = res.stdout
    assert "| Engine-reported GPU KV tokens | 283,917 | 553,243 | +269,326 / +94.861% |" in text
    assert "unexplained capacity change: YES" in text
    assert "services.vllm.command.--max-num-batched-tokens: 8192 -> 4096" in text
    assert text.count("**Load benchmark: ") == 2 and text.count("**Context ladder: ") == 2
    assert "| 4 | 6 | 0 |" in text  # concurrency 4: six requests completed, none failed
    assert "| Concurrency | Metric | a | b | Change |" in text  # compare's per-level bench deltas


def test_json_form_and_its_schema(bundles):
    project, runs = bundles
    # run names under runs/ work too
    res = _cli(project, "report", runs[0].name, runs[1].name, "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert RunsReport.model_validate(doc).to_json() == doc
    assert [r["label"] for r in doc["runs"]] == ["8192-131k", "4096-131k"]
    assert doc["runs"][1]["startup"]["kv_cache_gib_per_rank"] == [15.99, 16.0]
    assert all(r["bench"]["levels"][2]["completed"] == 6 for r in doc["runs"])
    assert len(doc["comparisons"]) == 1 and doc["comparisons"][0]["bench"]["levels"]
    schema = run_cli("schema", "--report", "report")
    assert schema.returncode == 0 and "RunSummary" in json.loads(schema.stdout)["$defs"]


def test_the_html_page_is_self_contained(bundles, tmp_path):
    project, runs = bundles
    page = tmp_path / "report.html"
    res = _cli(project, "report", *map(str, runs), "--html", str(page))
    assert res.returncode == 0, res.stderr
    html = page.read_text(encoding="utf-8")
    assert re.findall(r'data-plot="(\w+)"', html) == PLOT_NAMES
    assert html.count("<svg") == len(PLOT_NAMES)
    # Nothing to fetch: no script, stylesheet link, import or url(); every href points inside the page.
    for fetching in ("<script", "<link", "@import", "<img", "<iframe", " src="):
        assert fetching not in html, fetching
    assert {h[0] for h in re.findall(r'href="([^"]*)"', html)} <= {"#"}
    assert {u[0] for u in re.findall(r"url\(([^)]*)\)", html)} == {"#"}  # clip paths inside the SVG
    # ids unique
    assert len(set(re.findall(r'id="([^"]+)"', html))) == len(re.findall(r'id="([^"]+)"', html))
    # recorded logs of a real vLLM: the banner is only for emulated runs
    assert "EMULATED" not in html
    # compare's deltas
    assert "Load benchmark, per concurrency level" in html and "request_throughput" in html
    for expected in (
        "283,917",
        "553,243",
        "9e165c30",
        "services.vllm.command.--max-num-batched-tokens",
    ):
        assert expected in html


def test_a_report_of_one_run_says_which_plots_have_no_data(bundles, tmp_path):
    project, runs = bundles
    doc = runreport.gather([str(runs[0])], root=project.root)
    doc.runs[0].bench = None
    html = reportpage.render_html(doc)
    assert 'data-missing-plot="bench"' in html and 'data-plot="ladder"' in html
    assert doc.comparisons == []


def test_compare_shows_per_level_bench_deltas(bundles):
    project, runs = bundles
    result = compare.compare_runs(runs[0], runs[1], root=project.root)
    rows = result.to_json()["bench"]["levels"]
    assert sorted({r["concurrency"] for r in rows}) == [1, 2, 4]
    throughput = next(
        r for r in rows if r["concurrency"] == 4 and r["metric"] == "request_throughput"
    )
    assert throughput["delta"] == pytest.approx(throughput["b"] - throughput["a"], abs=1e-6)
    text = _cli(project, "compare", str(runs[0]), str(runs[1])).stdout
    assert "bench, per concurrency level:" in text and "request_throughput" in text


def test_bad_runs_are_bad_input(bundles, tmp_path):
    project, runs = bundles
    missing = _cli(project, "report", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "no such run directory" in missing.stderr
    broken = tmp_path / "broken"
    shutil.copytree(runs[0], broken)
    doc = json.loads((broken / "evidence.json").read_text())
    doc["bench"]["levels"] = [{"concurrency": "many"}]
    (broken / "evidence.json").write_text(json.dumps(doc))
    res = _cli(project, "report", str(broken), "--markdown")
    assert res.returncode == 2 and "bench" in res.stderr and "Traceback" not in res.stderr


def test_matplotlib_is_only_imported_by_report():
    probe = (
        "import sys, composegen.cli.main, composegen.evidence.compare, composegen.bench.closed; "
    )
    probe += "print('matplotlib' in sys.modules)"
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert res.stdout.strip() == "False", res.stderr


def test_every_line_plot_starts_its_y_axis_at_zero(bundles, monkeypatch):
    """Two arms 1-2 % apart must not look like lines that cross: the ladder and bench axes start at 0."""
    from composegen.evidence import plots

    project, runs = bundles
    report = runreport.gather(list(map(str, runs)), root=project.root)
    drawn = {}
    monkeypatch.setattr(plots, "_svg", lambda fig, name: drawn.setdefault(name, fig) and "")
    plots.ladder(report), plots.bench(report)
    assert set(drawn) == {"ladder", "bench"}
    for name, fig in drawn.items():
        for ax in fig.axes:
            assert ax.get_ylim()[0] == 0, (name, ax.get_title(), ax.get_ylim())


def test_the_frontier_puts_both_arms_on_one_chart_with_their_pareto_fronts(bundles, monkeypatch):
    from composegen.bench import frontier
    from composegen.evidence import plots

    project, runs = bundles
    report = runreport.gather(list(map(str, runs)), root=project.root)
    for run in report.runs:
        run.emulated = True  # as an A/B on the emulator: the chart must say so
    drawn = {}
    monkeypatch.setattr(plots, "_svg", lambda fig, name: drawn.setdefault(name, fig) and "")
    plots.frontier(report)
    (ax,) = drawn["frontier"].axes
    assert "EMULATED" in ax.get_title()
    fronts = [line for line in ax.get_lines() if line.get_label().endswith(": front")]
    assert [line.get_label() for line in fronts] == [
        "8192-131k (EMULATED): front",
        "4096-131k (EMULATED): front",
    ]
    for run, line in zip(report.runs, fronts, strict=True):
        pairs = plots._pairs(run)
        expected = sorted(p for p, keep in zip(pairs, frontier.pareto(pairs), strict=True) if keep)
        assert list(zip(line.get_xdata(), line.get_ydata(), strict=True)) == expected
        assert len(pairs) == len(run.bench.levels)  # every level is a point, front or hollow
    assert ax.get_xlabel() == "output tokens/s per GPU" and ax.get_ylim()[0] == 0


def test_a_report_of_30000_bench_levels_is_built(bundles):
    """Issue 49: 30,000 levels (33 MB, under the size cap) ran past a minute — the frontier checked
    pairwise, then a tick label and a marker per level in the bench plot (600 levels: 83 s). Its
    time is measured by bench/bench_report_html.py (docs/bench.md); here: it completes, every level
    a point of the frontier, the concurrency axis a few ticks."""
    project, runs = bundles
    doc = runreport.gather([str(r) for r in runs], root=project.root)
    for run in doc.runs:
        assert run.bench is not None
        run.bench = inflated(run.bench, 30_000)
    html = reportpage.render_html(doc)
    assert re.findall(r'data-plot="(\w+)"', html) == PLOT_NAMES
    bench = html[html.index('data-plot="bench"') : html.index('data-plot="frontier"')]
    assert 0 < bench.count('id="bench-xtick_') <= 3 * plots.MAX_TICKS  # ticks on 3 axes, not 30,000
