"""A campaign carrying an open-loop bench arm (`campaign run … --bench-rates`) on the real engine:
both EMULATED arms measured at the same rates, the record saying what that does not prove, and the
report's frontier with both arms."""

from __future__ import annotations

import json

import pytest

from tests.support.campaigns import emulated_ab
from tests.support.cli import run_cli
from tests.support.engine import force_remove


@pytest.mark.docker
def test_a_campaign_carries_an_open_loop_bench_arm_and_its_frontier(tmp_path):
    root, control, candidate = emulated_ab(tmp_path)
    cli = lambda *args: run_cli("--root", str(root), *args, timeout=600)  # noqa: E731
    assert cli("render").returncode == 0
    try:
        res = cli("campaign", "run", control, candidate, "--emulate", "--name", "perf",
                  "--bench-rates", "2,4", "--bench-requests", "4", "--bench-input-tokens", "50",
                  "--bench-output-tokens", "8")  # fmt: skip
        assert res.returncode == 0, res.stdout + res.stderr
        directory = root / "runs" / "campaigns" / "perf"
        for arm in ("control", "candidate"):
            bench = json.loads((directory / arm / "evidence.json").read_text())["bench"]
            assert bench["arrivals"] == "open" and bench["emulated"] is True
            assert bench["gpus"] == 2 and bench["input_tokens"] == 50  # tensor-parallel-size 2
            assert [lv["request_rate"] for lv in bench["levels"]] == [2.0, 4.0]
            for level in bench["levels"]:
                assert level["completed"] == 4 and level["errors"] == 0
                assert level["tokens_per_s_per_user"] > 0 and level["output_throughput_per_gpu"] > 0
        compare = cli("compare", "perf", "--json")
        assert compare.returncode == 0, compare.stderr
        compared = json.loads(compare.stdout)["bench"]["levels"]
        assert {row["level"] for row in compared} == {"r2", "r4"}  # paired by rate, not all "c0"
        record = (directory / "campaign.md").read_text()
        assert "performance at other loads than 2, 4 requests/s (open loop)" in record
        assert "## Load benchmark" in record and "| r4 | send_lateness_p99_ms |" in record
        page = tmp_path / "perf.html"
        assert cli("report", "perf", "--html", str(page)).returncode == 0
        html = page.read_text()
        assert 'data-plot="frontier"' in html and "EMULATED" in html
        refused = cli("campaign", "run", control, candidate, "--bench-rates", "inf")
        assert refused.returncode == 2 and "finite" in refused.stderr
    finally:
        for name in (control, candidate):
            force_remove(f"composegen-{name}")


@pytest.mark.docker
def test_a_campaign_bench_at_concurrencies_sizes_its_requests(tmp_path):
    """`--bench C,…` asked bench for no request size and failed in every arm; it now sends
    --bench-input-tokens / --bench-output-tokens."""
    root, control, candidate = emulated_ab(tmp_path)
    cli = lambda *args: run_cli("--root", str(root), *args, timeout=600)  # noqa: E731
    assert cli("render").returncode == 0
    try:
        res = cli("campaign", "run", control, candidate, "--emulate", "--name", "conc",
                  "--bench", "1,2", "--bench-requests", "2", "--bench-output-tokens", "4")  # fmt: skip
        assert res.returncode == 0, res.stdout + res.stderr
        for arm in ("control", "candidate"):
            path = root / "runs" / "campaigns" / "conc" / arm / "evidence.json"
            bench = json.loads(path.read_text())["bench"]
            assert [lv["concurrency"] for lv in bench["levels"]] == [1, 2]
            assert bench["input_tokens"] == 256 and bench["output_tokens"] == 4
            assert all(lv["completed"] == 2 for lv in bench["levels"])
    finally:
        for name in (control, candidate):
            force_remove(f"composegen-{name}")
