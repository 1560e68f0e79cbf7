"""bench, evidence --bench, qualify's bench floors, compare and report on a real engine: the emulated vLLM
brought up by `up --emulate` (conftest.py's paced stack), with its pacing on."""

from __future__ import annotations

import json

import pytest

QUALIFY = """\
qualify:
  gates: [smoke]
  tools: 1
  bench:
    concurrency: 2
    requests: 6
    input_tokens: 150
    output_tokens: 8
    min_request_throughput: 0.5
    max_p99_ttft_ms: 60000
"""


@pytest.mark.docker
def test_bench_and_its_evidence_on_an_emulated_stack(tmp_path, paced_stack):
    stack = paced_stack("b", max_num_seqs=8, sections=QUALIFY)
    name, root, cli = stack.name, stack.root, stack.cli
    res = cli("bench", name, "--concurrency", "1,4", "--requests", "16", "--input-tokens", "300",
              "--output-tokens", "16", "--seed", "7", "--goodput", "ttft:60000", "--json")  # fmt: skip
    assert res.returncode == 0, res.stderr
    result = json.loads(res.stdout)
    one, four = result["levels"]
    assert result["emulated"] is True and result["seed"] == 7
    for level in (one, four):
        assert level["completed"] == 16 and level["errors"] == 0  # every request counted
        assert level["total_input_tokens"] == 16 * 300  # sized exactly through /tokenize
        assert level["request_goodput"] == level["request_throughput"]
    # The emulator paces each request (prefill, then 100 tok/s decode) and serves them side by side:
    # four in flight finish far more requests per second than one at a time.
    assert four["request_throughput"] > 1.5 * one["request_throughput"], (one, four)
    assert four["median_tpot_ms"] > 0 and one["p99_e2el_ms"] > one["p99_ttft_ms"]

    runs = []
    for levels in ("1,2", "1,2"):
        ev = cli("evidence", name, "--bench", levels, "--bench-requests", "4", "--bench-input-tokens", "100",
                 "--bench-output-tokens", "8", "--json")  # fmt: skip
        assert ev.returncode == 0, ev.stderr
        doc = json.loads(ev.stdout)["evidence"]
        assert [lv["completed"] for lv in doc["bench"]["levels"]] == [4, 4] and doc["bench"][
            "emulated"
        ] is True
        assert "bench.json" in [raw["file"] for raw in doc["raw"]]
        # the path printed is relative to the root
        runs.append(str(root / json.loads(ev.stdout)["path"]))
    compared = cli("compare", *runs, "--json")
    assert compared.returncode == 0, compared.stderr
    assert {row["concurrency"] for row in json.loads(compared.stdout)["bench"]["levels"]} == {
        1,
        2,
    }
    page = tmp_path / "report.html"
    report = cli("report", *runs, "--html", str(page))
    assert report.returncode == 0, report.stderr
    html = page.read_text()
    assert (
        'data-plot="bench"' in html
        and 'data-plot="kv_capacity"' in html
        and "EMULATED vLLM" in html
    )
    # the A/B's frontier: both runs on one chart, labelled as the emulator's
    assert 'data-plot="frontier"' in html and html.count(": front") >= 2

    qualified = cli("qualify", name, "--json")
    assert qualified.returncode == 0, qualified.stdout + qualified.stderr
    criteria = {c["name"]: c for c in json.loads(qualified.stdout)["criteria"]}
    assert criteria["bench"]["measured"] == 6 and criteria["request_throughput"]["passed"] is True
    assert criteria["p99_ttft_ms"]["threshold"] == 60000
