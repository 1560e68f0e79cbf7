"""bench's open loop against the emulator as a local subprocess (its pacing and --max-num-seqs
admission on; no Docker): the schedule is kept, queueing shows, vLLM's fields are written, and
--find-max lands on the emulated server's known capacity."""

from __future__ import annotations

import json
import math

import pytest

from composegen.bench import closed, rates
from composegen.bench.reports import BenchResult
from composegen.bench.spec import BenchSpec
from tests.support.emulator_proc import EmulatorProc

SEQS, OUTPUT, DECODE_TOK_S = 2, 20, 100  # nominal capacity: 2 / (20 / 100 s) = 10 requests/s


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    env = {"EMU_PREFILL_TOK_S": "20000", "EMU_DECODE_TOK_S": str(DECODE_TOK_S)}
    with EmulatorProc.start(
        tmp_path_factory.mktemp("emu"), extra_args=("--max-num-seqs", str(SEQS)), env=env
    ) as proc:
        yield proc


def test_three_rates_keep_their_schedule_and_show_the_queueing(emu, tmp_path):
    options = BenchSpec(input_tokens=60, output_tokens=OUTPUT, duration=2.0, seed=4)
    run = rates.run_rates(emu.base_url, emu.model, [2.0, 4.0, 14.0], options)
    result = run.result
    assert result.ok and result.arrivals == "open" and result.seed == 4
    for level, rate in zip(result.levels, (2.0, 4.0, 14.0), strict=True):
        assert level.request_rate == rate and level.burstiness == 1.0 and level.concurrency == 0
        assert level.completed == round(rate * 2.0) and level.errors == 0
        # sent on schedule: N requests in N/R seconds, each send's lateness recorded
        assert level.achieved_request_rate == pytest.approx(rate, rel=0.05)
        assert level.send_lateness_p99_ms is not None and 0 <= level.send_lateness_p50_ms <= 50
        # no cap: the client's queue is its send lateness
        assert level.client_queue_p99_ms == level.send_lateness_p99_ms
        assert level.output_throughput_per_gpu and level.tokens_per_s_per_user
    low, high = result.levels[0], result.levels[2]
    # above the emulator's capacity the client keeps sending: requests pile up in flight and
    # wait in the server's queue (its own histogram says so), which a closed loop would hide
    assert high.in_flight_max > SEQS >= low.in_flight_max
    assert high.server_queue_mean_ms > 50 > low.server_queue_mean_ms
    assert high.p99_ttft_ms > 3 * low.p99_ttft_ms
    assert result.comparability.server_check == "agrees"  # the queue shows on both sides
    assert BenchResult.model_validate(result.to_json()) == result

    written = closed.save_vllm_results(run, tmp_path)
    assert [p.name for p in written] == [f"vllm-bench-serve-r{r}.json" for r in ("2", "4", "14")]
    doc = json.loads(written[1].read_text())
    # vLLM's own traffic fields, as `vllm bench serve --request-rate 4` writes them
    assert (doc["request_rate"], doc["burstiness"], doc["max_concurrency"]) == (4.0, 1.0, None)
    assert doc["num_prompts"] == 8 and doc["completed"] == 8


def test_find_max_lands_on_the_emulated_capacity(emu):
    options = BenchSpec(
        input_tokens=60,
        output_tokens=OUTPUT,
        duration=2.0,
        burstiness=math.inf,  # even arrivals: below capacity nothing queues, above it grows
        seed=9,
        limits={"ttft_p99": 150.0},
    )
    run = rates.find_max(emu.base_url, emu.model, [2.0, 20.0], options, max_levels=6, repeats=1)
    found = run.result.find_max
    assert found is not None and len(found.probes) == 6 and run.result.slos == {"ttft_p99": 150.0}
    # the capacity this emulator really has: SEQS requests at a time, each taking what the
    # uncrowded lowest level measured (the nominal 0.2 s plus the emulator's own overhead)
    service_s = run.result.levels[0].median_e2el_ms / 1000
    capacity = SEQS / service_s
    assert 7 <= capacity <= 10.5, capacity
    assert found.best_rate is not None and found.first_failing_rate is not None
    assert 0.7 * capacity <= found.best_rate <= 1.1 * capacity, (found, capacity)
    assert found.first_failing_rate <= 1.4 * capacity
    failing = [lv for lv in run.result.levels if lv.slo_met is False]
    assert failing and all("ttft_p99" in lv.slo_failures[-1] for lv in failing)
    assert len(run.vllm_results) == 6
