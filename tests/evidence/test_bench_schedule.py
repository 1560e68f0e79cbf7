"""bench's open loop without an engine: vLLM's arrival schedule (seeded, its distribution and its
total duration), the per-level SLOs, the find-max bisection and the frontier's Pareto front."""

from __future__ import annotations

import itertools
import json
import math
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from composegen.bench import frontier, schedule, slo
from composegen.bench.findmax import check, search
from composegen.bench.reports import LevelResult
from composegen.errors import BadInput


def _gaps(offsets: list[float]) -> list[float]:
    return [b - a for a, b in zip([0.0, *offsets], offsets, strict=False)]


def test_a_schedule_is_seeded_and_ends_at_count_over_rate():
    a = schedule.offsets(4.0, 1.0, 200, seed=11)
    assert a == schedule.offsets(4.0, 1.0, 200, seed=11)  # the seed is the schedule
    assert a != schedule.offsets(4.0, 1.0, 200, seed=12)
    assert a[-1] == pytest.approx(200 / 4.0)  # rescaled as vLLM does: N/R seconds of sending
    assert a[0] > 0 and all(x < y for x, y in itertools.pairwise(a))  # the first waits a gap


@pytest.mark.parametrize("burstiness", [0.5, 1.0, 4.0])
def test_gaps_are_gamma_with_shape_b_and_mean_one_over_r(burstiness):
    rate, count = 10.0, 40_000
    gaps = _gaps(schedule.offsets(rate, burstiness, count, seed=3))
    mean = statistics.fmean(gaps)
    assert mean == pytest.approx(1 / rate, rel=1e-9)  # exact after the rescaling
    # a gamma's coefficient of variation is 1/sqrt(shape): bursty below 1, even above
    assert statistics.pstdev(gaps) / mean == pytest.approx(1 / math.sqrt(burstiness), rel=0.04)
    if burstiness == 1.0:  # exponential: P(gap < mean) = 1 − 1/e
        below = sum(g < mean for g in gaps) / count
        assert below == pytest.approx(1 - math.exp(-1), abs=0.01)


def test_inf_rate_sends_at_once_and_inf_burstiness_evenly():
    assert schedule.offsets(math.inf, 1.0, 5, seed=1) == [0.0] * 5
    even = schedule.offsets(2.0, math.inf, 4, seed=1)
    assert even == pytest.approx([0.5, 1.0, 1.5, 2.0])


def test_rates_and_request_counts_are_checked():
    assert schedule.parse_rates("0.5, 2,inf") == [0.5, 2.0, math.inf]
    for bad in ("", "0", "-1", "fast", "nan"):
        with pytest.raises(BadInput):
            schedule.parse_rates(bad)
    assert schedule.requests_for(2.5, None, 4.0) == 10
    assert schedule.requests_for(0.1, None, 1.0) == 1
    assert schedule.requests_for(math.inf, 7, None) == 7
    with pytest.raises(BadInput, match="inf"):
        schedule.requests_for(math.inf, None, 3.0)
    with pytest.raises(BadInput):
        schedule.parse_burstiness(0)


def _level(**figures) -> LevelResult:
    base = dict(
        concurrency=0, completed=10, errors=0, error_messages=[], duration=1.0,
        total_input_tokens=100, total_output_tokens=100, request_throughput=10.0,
        output_throughput=100.0, total_token_throughput=200.0, distinct_prompts=10,
        client_cpu_ms_per_request=0.1, client_cpu_share=0.01,
    )  # fmt: skip
    return LevelResult(**{**base, **figures})


def test_slos_judge_whole_levels():
    limits = slo.parse("ttft_p99=500,tpot_p99=50")
    assert limits == {"ttft_p99": 500.0, "tpot_p99": 50.0}
    good = slo.judged(_level(p99_ttft_ms=420.0, p99_tpot_ms=49.9), limits)
    assert good.slo_met is True and good.slo_failures == []
    bad = slo.judged(_level(p99_ttft_ms=812.5, p99_tpot_ms=20.0, errors=1), limits)
    assert bad.slo_met is False
    assert bad.slo_failures == ["1 failed request(s), 10 completed", "ttft_p99 812.5 > 500"]
    missing = slo.judged(_level(p99_ttft_ms=1.0), limits)  # no TPOT: not a pass
    assert missing.slo_failures == ["tpot_p99 none > 50"]
    for text in ("ttft=500", "ttft_p99:500", "ttft_p99=-1", "gpu_p99=5"):
        with pytest.raises(BadInput):
            slo.parse(text)


def _capacity_probe(capacity: float, ran: list[float]):
    """A server whose p99 TTFT breaks 500 ms above `capacity` requests per second."""

    def probe(rate: float) -> list[LevelResult]:
        ran.append(rate)
        ttft = 100.0 if rate <= capacity else 2000.0
        return [_level(p99_ttft_ms=ttft, achieved_request_rate=rate)]

    return probe


def test_find_max_bisects_to_the_capacity_within_its_budget():
    ran: list[float] = []
    found, levels = search(_capacity_probe(7.3, ran), {"ttft_p99": 500}, 1, 64, 8, 20, 1)
    assert ran[:2] == [1, 64] and len(ran) == 8 == len(found.probes) == len(levels)
    assert found.best_rate is not None and found.first_failing_rate is not None
    assert found.best_rate <= 7.3 < found.first_failing_rate
    assert found.first_failing_rate / found.best_rate < 1.25  # six halvings of log(64)
    assert [p.passed for p in found.probes][:2] == [True, False]


def test_find_max_says_when_the_bounds_decide():
    ran: list[float] = []
    none, _ = search(_capacity_probe(0.5, ran), {"ttft_p99": 500}, 1, 8, 6, 20, 1)
    assert none.best_rate is None and none.first_failing_rate == 1 and ran == [1]
    ran = []
    above, _ = search(_capacity_probe(100, ran), {"ttft_p99": 500}, 1, 8, 6, 20, 1)
    assert above.best_rate == 8 and above.first_failing_rate is None and ran == [1, 8]
    with pytest.raises(BadInput):
        check([1.0], {"ttft_p99": 1}, 6)
    with pytest.raises(BadInput):
        check([4.0, 2.0], {"ttft_p99": 1}, 6)
    with pytest.raises(BadInput, match="--slo"):
        check([1.0, 2.0], None, 6)


def test_repeats_give_the_spread_at_the_answer():
    def probe(rate: float) -> list[LevelResult]:
        return [_level(p99_ttft_ms=100.0 + rate, achieved_request_rate=rate - 0.1),
                _level(p99_ttft_ms=130.0 + rate, achieved_request_rate=rate)]  # fmt: skip

    found, levels = search(probe, {"ttft_p99": 500}, 1, 8, 2, 20, 2)
    assert found.best_rate == 8 and len(levels) == 4
    assert found.spread == {"ttft_p99": 30.0, "achieved_request_rate": 0.1}


def test_the_pareto_front_keeps_the_undominated_points():
    pts = [(100.0, 50.0), (200.0, 40.0), (150.0, 30.0), (300.0, 10.0), (90.0, 60.0)]
    assert frontier.pareto(pts) == [True, True, False, True, True]
    level = frontier.with_frontier(_level(median_tpot_ms=20.0, output_throughput=500.0), gpus=2)
    assert level.output_throughput_per_gpu == 250.0 and level.tokens_per_s_per_user == 50.0


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([0.0, 1.0, 2.0, 3.5, math.inf, math.nan]), st.integers(0, 4).map(float)
        ),
        max_size=12,
    )
)
def test_the_pareto_front_is_the_definition_on_ties_infinities_and_nans(pts):
    """The sweep (n log n: a 30,000-level bundle's report was quadratic) keeps exactly the points no
    other point is at least as good as on both axes, ties and duplicates included."""
    naive = [not any(q[0] >= p[0] and q[1] >= p[1] and q != p for q in pts) for p in pts]
    assert frontier.pareto(pts) == naive


def test_open_loop_options_are_checked_before_the_stack_with_exit_2():
    from tests.support.cli import run_cli

    sizes = ["--input-tokens", "10", "--output-tokens", "2"]
    for args, says in (
        (["--request-rate", "0"], "--request-rate"),
        (["--request-rate", "2", "--burstiness", "0"], "--burstiness"),
        (["--request-rate", "2", "--slo", "ttft=5"], "--slo"),
        (["--request-rate", "inf", "--duration", "2"], "inf"),
        (["--find-max", "--request-rate", "1,4"], "--slo"),
        (["--find-max", "--request-rate", "4,1", "--slo", "ttft_p99=9"], "LOW,HIGH"),
        (
            ["--find-max", "--request-rate", "1,4", "--slo", "ttft_p99=9", "--max-levels", "1"],
            "≥ 2",
        ),
    ):
        res = run_cli("bench", "no-such-profile", *sizes, *args)
        assert res.returncode == 2 and says in res.stderr and "Traceback" not in res.stderr, (
            args,
            res.stderr,
        )
    schema = run_cli("schema", "--report", "bench")
    defs = json.loads(schema.stdout)["$defs"]
    assert {"send_lateness_p99_ms", "tokens_per_s_per_user", "slo_met"} <= set(
        defs["LevelResult"]["properties"]
    )
    assert "best_rate" in defs["FindMax"]["properties"]


def test_a_bad_rate_names_the_option_it_came_from():
    from composegen.cli.bench_rates import campaign_rates

    said = []
    for call in (
        lambda: schedule.parse_rates("2,0"),
        lambda: schedule.parse_rates("2,fast", "evidence: --bench-rates"),
        lambda: campaign_rates(" , ", None),
    ):
        try:
            call()
        except BadInput as exc:
            said.append(exc.message)
    assert said == [
        "bench: --request-rate: '0': requests per second in (0, 100000], or inf",
        "evidence: --bench-rates: 'fast': requests per second in (0, 100000], or inf",
        "campaign run: --bench-rates: give at least one rate, e.g. 2,4,8",
    ]
