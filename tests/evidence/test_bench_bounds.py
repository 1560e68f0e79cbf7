"""bench within bounds (issue 49.6): every numeric option out of range is a clear refusal (exit 2)
before any work — the profile's stack is not even looked up (none runs here); fuzzed, any option
ends in 0, 1, 2 or 3 with a message, never an internal error, out of memory or a run without end."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.cli import assert_bad_input, assert_no_crash, run_inproc
from tests.support.profiles import BASE, project
from tests.test_fuzz_inputs import FUZZ

SIZES = ("--input-tokens", "8", "--output-tokens", "4")
REFUSED = [
    (["--request-rate", "1e308"], "--request-rate"),
    (["--request-rate", "2", "--duration", "1e308"], "--duration"),
    (["--request-rate", "2", "--burstiness", "1e308"], "--burstiness"),
    (["--request-rate", "2", "--requests", "1000000000000"], "--requests"),
    (["--requests", "1000000000000"], "--requests"),
    (["--concurrency", "1000000000"], "--concurrency"),
    (["--duration", "1e308"], "--duration"),
    (["--request-rate", "1,1e308", "--find-max", "--slo", "ttft_p99=500"], "--request-rate"),
    (["--request-rate", "1,8", "--find-max", "--slo", "ttft_p99=5", "--repeats", "1000000000"], "--repeats"),
    (["--request-rate", "1,8", "--find-max", "--slo", "ttft_p99=5", "--max-levels", "1000000"], "--max-levels"),
    (["--request-rate", "1e-300", "--duration", "1"], "--request-rate"),
    (["--request-rate", "1e-3", "--requests", "1000"], "--request-rate"),
    (["--request-rate", "50000", "--duration", "80000"], "--request-rate"),
    (["--input-tokens", "1000000000000"], "--input-tokens"),
]  # fmt: skip


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return project(tmp_path_factory.mktemp("bounds"), BASE, "base")


@pytest.mark.parametrize(
    ("argv", "named"), REFUSED, ids=lambda v: " ".join(v) if isinstance(v, list) else v
)
def test_an_option_out_of_bounds_is_refused_before_any_work(root, argv, named):
    res = run_inproc("--root", str(root), "bench", "base", *SIZES, *argv)
    assert_bad_input(res, named)
    assert "not running" not in res.stderr  # refused before the stack was looked up


def test_the_evidence_and_campaign_rates_are_bounded_too(root):
    res = run_inproc("--root", str(root), "evidence", "base", "--bench-rates", "1e308")
    assert_bad_input(res, "--bench-rates")
    res = run_inproc(
        "--root", str(root), "evidence", "base", "--bench", "100000", "--bench-requests", "5"
    )
    assert_bad_input(res, "--concurrency")


NUMBERS = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["inf", "-inf", "nan", "1e308", "1e-300", "0", "-1", "", "1,1e308", "x"]),
)
OPTIONS = [
    "--request-rate",
    "--duration",
    "--burstiness",
    "--requests",
    "--concurrency",
    "--repeats",
    "--max-levels",
]


@FUZZ
@given(
    picked=st.lists(st.tuples(st.sampled_from(OPTIONS), NUMBERS), min_size=1, max_size=3),
    find=st.booleans(),
)
def test_fuzzed_bench_options_never_crash(root, picked, find):
    argv = [part for option, value in picked for part in (option, value)]
    if find:
        argv += ["--find-max", "--slo", "ttft_p99=500"]
    res = run_inproc("--root", str(root), "bench", "base", *SIZES, *argv)
    assert res.returncode == 3 or assert_no_crash(res) is None  # 3: the stack is not running
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr, res.stderr
