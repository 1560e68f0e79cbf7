"""The bench tables as Markdown, against golden files, on results recorded from the emulator
(tests/data/bench/: an open loop at 2, 4 and 14 req/s with an SLO, the same at twice the decode
speed, a --find-max search, and a closed loop): an open loop's table has its own columns (the rate
asked and achieved, send lateness, queueing, SLO pass/fail); a closed loop's table is as it was.
`report --markdown` and `compare --markdown` show them. Rewrite the golden files (then read the
diff) with COMPOSEGEN_UPDATE_GOLDEN=1."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import jsonschema
import pytest

from composegen.bench import deltas as benchcompare
from composegen.bench import opentext, stats
from composegen.bench.reports import BenchResult
from composegen.evidence import bundle as evidence
from composegen.profiles import resolve as profile
from composegen.project import Project
from composegen.vllm import startup
from tests.support.campaigns import seeded_campaign
from tests.support.cli import run_cli
from tests.support.helpers import make_project

DATA = Path(__file__).resolve().parents[1] / "data"
GOLDEN = DATA / "golden" / "bench"


def _recorded(name: str) -> BenchResult:
    return BenchResult.model_validate_json((DATA / "bench" / f"{name}.json").read_text())


def _golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("COMPOSEGEN_UPDATE_GOLDEN") == "1":
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")


def test_a_closed_loop_table_keeps_its_columns():
    _golden("closed.md", stats.format_markdown(_recorded("closed-emulated")))


def test_an_open_loop_table_has_rates_lateness_queueing_and_the_slo():
    result = _recorded("open-rates-emulated")
    text = opentext.format_markdown(result)
    _golden("open-rates.md", text)
    head, _, *rows = text.splitlines()[:5]
    assert "| Rate req/s | Achieved req/s |" in head and "| Send lateness p99 ms |" in head
    assert "| Server queue mean ms |" in head and head.endswith("| SLO ttft_p99 ≤ 150 ms |")
    assert rows[0].endswith("| pass |") and rows[2].endswith("| FAIL: ttft_p99 958.174 > 150 |")


def test_a_find_max_table_ends_with_its_answer():
    text = opentext.format_markdown(_recorded("find-max-emulated"))
    _golden("find-max.md", text)
    assert "- find-max: highest rate meeting ttft_p99 ≤ 150 ms: 6.325 req/s (11.247 failed)" in text


def test_compare_pairs_open_levels_by_rate_with_their_own_figures():
    deltas = benchcompare.deltas(
        _recorded("open-rates-emulated"), _recorded("open-rates-emulated-b")
    )
    _golden("compare-open.md", "\n".join(benchcompare.format_lines(deltas, markdown=True)) + "\n")
    metrics = [r.metric for r in deltas.levels if r.level == "r14"]
    assert metrics[-4:] == [
        "achieved_request_rate",
        "send_lateness_p99_ms",
        "in_flight_mean",
        "server_queue_mean_ms",
    ]
    assert deltas.notes == [
        "SLO (ttft_p99 ≤ 150 ms) per level, a / b: r2 pass / pass, r4 pass / pass, r14 FAIL / FAIL"
    ]
    text = "\n".join(benchcompare.format_lines(deltas))
    assert "bench, per level:" in text and "  level  metric" in text


def test_a_closed_loop_compare_keeps_its_columns():
    closed = _recorded("closed-emulated")
    lines = benchcompare.format_lines(benchcompare.deltas(closed, closed), markdown=True)
    assert lines[1] == "| Concurrency | Metric | a | b | Change |"
    assert {r.split(" | ")[1] for r in lines[3:]} == {m for m, _ in benchcompare.COMPARED}


@pytest.fixture(scope="module")
def open_runs(tmp_path_factory):
    """Two bundles of the seed's recorded startup logs carrying the recorded open-loop results."""
    tmp = tmp_path_factory.mktemp("open-runs")
    make_project(tmp, {}, copy_shipped=True)
    project = Project(tmp)
    runs = []
    arms = (
        ("8192-131k", "vllm-0.33.0-r33-8192-arm.log", "open-rates-emulated"),
        ("4096-131k", "vllm-0.33.0-r33-4096-arm.log", "open-rates-emulated-b"),
    )
    for n, (name, log, recorded) in enumerate(arms):
        text = (DATA / "logs" / log).read_text(encoding="utf-8")
        runs.append(
            evidence.write_run(
                project,
                profile.load(project, name),
                startup_log_text=text,
                startup_report=startup.parse_startup_log(text),
                bench=_recorded(recorded),
                source="log",
                now=datetime(2026, 12, 5, 8, n, tzinfo=UTC),
            )
        )
    return project, runs


def test_report_and_compare_markdown_show_the_open_loop_tables(open_runs):
    project, runs = open_runs
    cli = lambda *args: run_cli("--root", str(project.root), *args, timeout=180)  # noqa: E731
    report = cli("report", *map(str, runs), "--markdown")
    assert report.returncode == 0, report.stderr
    for golden in ("open-rates.md", "compare-open.md"):
        table = (GOLDEN / golden).read_text(encoding="utf-8").strip().splitlines()
        assert "\n".join(table[:5]) in report.stdout, golden
    assert "| Concurrency | Completed |" not in report.stdout
    compared = cli("compare", *map(str, runs), "--markdown")
    assert compared.returncode == 0, compared.stderr
    assert "| Level | Metric | a | b | Change |" in compared.stdout
    assert "| r14 | server_queue_mean_ms |" in compared.stdout


def test_the_html_report_shows_the_open_loop_columns(open_runs, tmp_path):
    project, runs = open_runs
    page = tmp_path / "open.html"
    res = run_cli("--root", str(project.root), "report", *map(str, runs), "--html", str(page))
    assert res.returncode == 0, res.stderr
    html = page.read_text(encoding="utf-8")
    for column in opentext.head(_recorded("open-rates-emulated")):
        assert f"<th>{column}</th>" in html
    assert "<td>FAIL: ttft_p99 958.174 &gt; 150</td>" in html and "<td>pass</td>" in html
    # the bundles say "log" (the startup logs are recorded), the bench says where it was measured
    assert "<p>EMULATED vLLM, open loop (burstiness 1, seed 4): send lateness" in html


def test_the_legend_says_where_the_figures_came_from():
    result = _recorded("open-rates-emulated")
    said = {
        emulated: opentext.legend(result.model_copy(update={"emulated": emulated}))
        for emulated in (True, False, None)
    }
    assert said[True].startswith("EMULATED vLLM, open loop")
    assert said[False].startswith("measured, open loop")
    assert said[None].startswith("measured (engine not recorded), open loop")


def test_a_rate_only_one_run_measured_is_named_by_its_rate():
    a, b = _recorded("open-rates-emulated"), _recorded("open-rates-emulated-b")
    b = b.model_copy(update={"levels": b.levels[:2]})  # b stopped before 14 req/s
    deltas = benchcompare.deltas(a, b)
    assert (deltas.only_a, deltas.only_a_rates, deltas.only_b_rates) == ([], ["r14"], [])
    assert {r.level for r in deltas.levels} == {"r2", "r4"}
    assert "  measured only in a: r14 (open loop)" in benchcompare.format_lines(deltas)


def test_a_campaign_record_carries_the_arms_open_loop_bench(tmp_path):
    """campaign.md and comparison.json: the control's and the candidate's open-loop levels side
    by side, by rate, with the open loop's own figures and the SLO verdicts."""
    benches = {
        "control": _recorded("open-rates-emulated"),
        "bracket": _recorded("open-rates-emulated"),
        "candidate": _recorded("open-rates-emulated-b"),
    }
    _, directory = seeded_campaign(tmp_path, plant_config=False, benches=benches)
    record = (directory / "campaign.md").read_text(encoding="utf-8")
    section = record.split("## Load benchmark\n", 1)[1].split("\n## ", 1)[0]
    assert section.startswith(
        "\na = 8192-131k control, b = 4096-131k candidate, at the same loads (measured).\n"
    )
    table = (GOLDEN / "compare-open.md").read_text(encoding="utf-8")
    assert table.strip() in section  # compare's open-loop table, as compare --markdown shows it
    doc = json.loads((directory / "comparison.json").read_text(encoding="utf-8"))
    assert {row["level"] for row in doc["bench"]["levels"]} == {"r2", "r4", "r14"}
    schema = run_cli("schema", "--report", "comparison")
    jsonschema.validate(doc, json.loads(schema.stdout))


def test_a_campaign_without_a_bench_has_no_bench_section(tmp_path):
    _, directory = seeded_campaign(tmp_path, plant_config=False)
    assert "## Load benchmark" not in (directory / "campaign.md").read_text(encoding="utf-8")
    assert json.loads((directory / "comparison.json").read_text())["bench"] is None
