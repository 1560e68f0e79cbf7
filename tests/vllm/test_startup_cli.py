"""`composegen startup --log`: the report, profile mismatches, exit codes."""

from __future__ import annotations

import json

from tests.support.cli import run_cli
from tests.support.helpers import REPO

LOGS = REPO / "tests/data/logs"


def test_arm_log_matches_its_profile():
    res = run_cli(
        "startup", "--log", str(LOGS / "vllm-0.33.0-r33-4096-arm.log"), "4096-131k", "--json"
    )
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["kv_cache_tokens"] == 553243 and report["mismatches"] == []


def test_mismatch_between_profile_and_engine_fails_the_check():
    res = run_cli("startup", "--log", str(LOGS / "vllm-0.33.0-r33-4096-arm.log"), "8192-131k")
    assert res.returncode == 1
    assert "MISMATCH max-num-batched-tokens: profile 8192, engine 4096" in res.stdout


def test_failed_start_is_exit_1_with_a_hint():
    res = run_cli("startup", "--log", str(LOGS / "vllm-0.33.0-kv-too-small.log"))
    assert res.returncode == 1
    assert "kv_too_small_for_max_len" in res.stdout and "at most 85264" in res.stdout


def test_missing_log_is_bad_input():
    res = run_cli("startup", "--log", "/nonexistent.log")
    assert res.returncode == 2 and "Traceback" not in res.stderr


def test_engine_failure_lines_name_the_cause_or_fall_back(tmp_path):
    wrapper = (
        "(EngineCore_DP0 pid=9) ERROR 11-29 15:45:58 [core.py:912] EngineCore failed to start.\n"
    )
    cause = (
        "(EngineCore_DP0 pid=9) ERROR 11-29 15:45:58 [core.py:912] torch.AcceleratorError: CUDA error: "
        "an illegal memory access was encountered\n"
    )
    both, alone = tmp_path / "both.log", tmp_path / "alone.log"
    both.write_text(wrapper + cause)
    alone.write_text(wrapper)

    def kinds(p):
        report = json.loads(run_cli("startup", "--log", str(p), "--json").stdout)
        return [e["kind"] for e in report["errors"]]

    assert kinds(both) == ["cuda_error"]  # the specific cause, not the wrapper around it
    assert kinds(alone) == ["engine_core_failed"]


def test_a_truncated_args_line_warns_in_text_and_json_and_compares_nothing(tmp_path):
    text = (LOGS / "vllm-0.33.0-r33-4096-arm.log").read_text(encoding="utf-8")
    line = next(x for x in text.splitlines() if "non-default args:" in x)
    cut = tmp_path / "cut.log"
    cut.write_text(text.replace(line, line[: len(line) // 2]), encoding="utf-8")
    res = run_cli("startup", "--log", str(cut), "8192-131k", "--json")
    report = json.loads(res.stdout)
    assert report["effective_args"] is None and report["mismatches"] is None  # unknown, not "none"
    assert any("cut off" in w and "not compared" in w for w in report["warnings"])
    text_res = run_cli("startup", "--log", str(cut), "8192-131k")
    assert "warning: the `non-default args:` line is cut off" in text_res.stdout
    assert "effective_args:" in text_res.stdout and "unknown" in text_res.stdout
    # the full log would show one (see above): here nothing is known
    assert "MISMATCH" not in text_res.stdout


def test_dev_zero_ends_with_a_warning_instead_of_hanging():
    res = run_cli("startup", "--log", "/dev/zero", "--json", timeout=60)
    # not ready: a check failure, not a crash
    assert res.returncode == 1 and "Traceback" not in res.stderr
    report = json.loads(res.stdout)
    assert report["ready"] is False and any("without a line break" in w for w in report["warnings"])


def test_real_fp8_log_is_ready_and_keeps_the_request_time_traceback_apart():
    res = run_cli(
        "startup",
        "--log",
        str(REPO / "tests/data/real-0.26.0-h200/serve-fp8-hermes-apikey.log"),
        "--json",
    )
    # ready, no startup error: the hermes traceback came later
    assert res.returncode == 0, res.stdout
    report = json.loads(res.stdout)
    assert report["errors"] == [] and [e["kind"] for e in report["runtime_errors"]] == ["exception"]
    assert "sk-test" not in res.stdout
