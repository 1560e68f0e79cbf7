"""qualify's `bench:` criteria: throughput floors and latency ceilings judged on a real sweep against the
emulator (a local subprocess with its pacing), the bench kept in the evidence bundle."""

from __future__ import annotations

import functools

import pytest

from composegen.bench import closed
from composegen.errors import BadInput
from composegen.evidence import bundle as evidence
from composegen.evidence import gates, ladder, qualify, qualifycriteria
from composegen.profiles import resolve as profile
from composegen.project import Project
from composegen.vllm import startup
from tests.support.emulator_proc import EmulatorProc
from tests.support.helpers import MINIMAL, make_project

BENCH = """\
qualify:
  gates: [smoke]
  tools: 1
  bench:
    concurrency: 2
    requests: 4
    input_tokens: 120
    output_tokens: 6
"""


def _profile(limits: str) -> str:
    return MINIMAL.replace("served_name: tiny", "served_name: emu-b") + BENCH + limits


@pytest.fixture
def project(tmp_path) -> Project:
    easy = "    min_request_throughput: 0.1\n    max_p99_e2el_ms: 120000\n"
    hard = "    min_output_throughput: 1000000\n    max_median_ttft_ms: 0.001\n"
    make_project(tmp_path, {"easy": _profile(easy), "hard": _profile(hard)})
    return Project(tmp_path)


def _qualify(project: Project, tmp_path, name: str):
    r = profile.load(project, name)
    served = r.profile.model.served_name
    with EmulatorProc.start(tmp_path, serve_args=r.argv(), env={"EMU_DECODE_TOK_S": "300"}) as emu:
        log = emu.log_text()
        return qualify.qualify(
            project,
            r,
            startup_report=startup.parse_startup_log(log),
            startup_log_text=log,
            run_ladder_fn=functools.partial(ladder.run_ladder, emu.base_url, served),
            run_gates_fn=functools.partial(gates.run_gates, emu.base_url, served),
            run_bench_fn=functools.partial(closed.run_bench, emu.base_url, served),
        )


def test_floors_that_hold_qualify_and_the_bench_is_evidence(project, tmp_path):
    found = _qualify(project, tmp_path, "easy")
    result = found.to_json()
    crit = {c["name"]: c for c in result["criteria"]}
    assert crit["bench"] == {
        "name": "bench",
        "measured": 4,
        "threshold": 4,
        "passed": True,
        "reason": None,
    }
    assert crit["request_throughput"]["passed"] and crit["request_throughput"]["measured"] > 0.1
    assert crit["p99_e2el_ms"]["passed"] and crit["p99_e2el_ms"]["threshold"] == 120000
    assert "output_throughput" not in crit  # unset limits are not judged
    assert result["qualified"] is True, result["criteria"]
    doc = evidence.load_run(result["run"]).as_read()
    assert doc["bench"]["levels"][0]["concurrency"] == 2 and doc["bench"] == result["bench"]
    assert "bench.json" in [raw["file"] for raw in doc["raw"]]


def test_floors_that_do_not_hold_fail_with_the_measured_figure(project, tmp_path):
    found = _qualify(project, tmp_path, "hard")
    result = found.to_json()
    crit = {c["name"]: c for c in result["criteria"]}
    assert crit["bench"]["passed"] is True  # the requests went through: only the limits fail
    low = crit["output_throughput"]
    assert low["passed"] is False and low["reason"] == f"{low['measured']} < 1000000.0"
    slow = crit["median_ttft_ms"]
    assert slow["passed"] is False and slow["reason"].endswith("> 0.001")
    assert result["qualified"] is False
    assert "FAIL  output_throughput" in qualify.format_text(found)


def test_no_bench_client_and_a_dead_engine_are_failed_criteria(project):
    r = profile.load(project, "easy")
    spec = r.profile.qualify.bench
    _, crit = qualifycriteria._bench_criteria(spec, True, None)
    assert crit[0].passed is False and "no bench client" in (crit[0].reason or "")
    _, crit = qualifycriteria._bench_criteria(spec, False, lambda *a, **k: None)
    assert all(not c.passed and c.reason == "not run: the engine is not ready" for c in crit)


def test_a_bench_section_with_bad_values_is_refused(tmp_path):
    make_project(tmp_path, {"bad": _profile("    min_request_throughput: fast\n")})
    with pytest.raises(BadInput, match="min_request_throughput"):
        profile.load(Project(tmp_path), "bad")
