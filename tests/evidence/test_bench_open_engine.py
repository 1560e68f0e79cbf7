"""bench's open loop through the CLI on a real engine: the emulated vLLM brought up by `up
--emulate` (conftest.py's paced stack), with --max-num-seqs 2 and 100 tokens/s of decode per
request — a known capacity of about 2 / 0.2 s = 10 requests per second of 20 output tokens."""

from __future__ import annotations

import json

import pytest

from tests.support.cli import run_cli
from tests.support.engine import tiny_profile
from tests.support.helpers import make_project

SIZES = ("--input-tokens", "60", "--output-tokens", "20")


@pytest.mark.docker
def test_open_loop_rates_and_find_max_on_an_emulated_stack(tmp_path, paced_stack):
    stack = paced_stack("o", max_num_seqs=2)
    name, cli = stack.name, stack.cli
    saved = tmp_path / "vllm"
    res = cli("bench", name, "--request-rate", "2,4,6", "--duration", "2", *SIZES, "--seed", "3",
              "--save-vllm-results", str(saved), "--json")  # fmt: skip
    assert res.returncode == 0, res.stderr
    result = json.loads(res.stdout)
    assert result["emulated"] is True and result["arrivals"] == "open" and result["gpus"] == 1
    for level, rate in zip(result["levels"], (2, 4, 6), strict=True):
        assert level["completed"] == 2 * rate and level["errors"] == 0
        assert abs(level["achieved_request_rate"] - rate) <= 0.05 * rate  # the schedule held
        assert level["send_lateness_p99_ms"] is not None
        assert level["output_throughput_per_gpu"] > 0 and level["tokens_per_s_per_user"] > 0
    files = sorted(p.name for p in saved.iterdir())
    assert files == ["vllm-bench-serve-r2.json", "vllm-bench-serve-r4.json",
                     "vllm-bench-serve-r6.json"]  # fmt: skip
    doc = json.loads((saved / "vllm-bench-serve-r6.json").read_text())
    assert (doc["request_rate"], doc["burstiness"], doc["max_concurrency"]) == (6.0, 1.0, None)

    found = cli("bench", name, "--find-max", "--request-rate", "2,20", "--duration", "2",
                "--burstiness", "inf", "--slo", "ttft_p99=150", "--max-levels", "5", *SIZES,
                "--json")  # fmt: skip
    assert found.returncode == 0, found.stderr
    doc = json.loads(found.stdout)
    search = doc["find_max"]
    capacity = 2 / (doc["levels"][0]["median_e2el_ms"] / 1000)  # measured uncrowded service
    assert 7 <= capacity <= 10.5
    assert 0.7 * capacity <= search["best_rate"] <= 1.1 * capacity, (search, capacity)
    assert search["first_failing_rate"] <= 1.5 * capacity and len(search["probes"]) == 5
    text = cli("bench", name, "--request-rate", "3", "--requests", "4", *SIZES,
               "--slo", "ttft_p99=100000")  # fmt: skip
    assert text.returncode == 0 and "(EMULATED vLLM)" in text.stdout and " pass" in text.stdout

    # evidence takes the campaign's open-loop bench too: a bundle whose bench is open loop
    ev = cli("evidence", name, "--bench-rates", "2,4", "--bench-requests", "4",
             "--bench-input-tokens", "60", "--bench-output-tokens", "8", "--json")  # fmt: skip
    assert ev.returncode == 0, ev.stderr
    bench = json.loads(ev.stdout)["evidence"]["bench"]
    assert bench["arrivals"] == "open" and bench["emulated"] is True and bench["gpus"] == 1
    assert [lv["request_rate"] for lv in bench["levels"]] == [2.0, 4.0]
    assert [lv["completed"] for lv in bench["levels"]] == [4, 4]
    run = str(stack.root / json.loads(ev.stdout)["path"])
    report = cli("report", run, "--markdown")
    assert report.returncode == 0, report.stderr
    assert "| Rate req/s | Achieved req/s |" in report.stdout
    assert "EMULATED vLLM, open loop (burstiness 1" in report.stdout


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--bench", "1", "--bench-rates", "2"), "one bench per run"),
        (("--bench-rates", "2,fast"), "evidence: --bench-rates: 'fast'"),
        (("--bench-rates", "2", "--bench-via-edge"), "--bench-via-edge needs --bench"),
    ],
)
def test_evidence_refuses_a_bench_it_cannot_run_before_touching_the_stack(tmp_path, args, says):
    root = make_project(tmp_path, {"t": tiny_profile("t-served", "{host: 1}")})
    res = run_cli("--root", str(root), "evidence", "t", *args)
    assert res.returncode == 2 and says in res.stderr, res.stderr
