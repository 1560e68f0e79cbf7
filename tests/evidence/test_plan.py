"""Capacity plan from a calibration startup report (the seed's recorded arm logs)."""

from __future__ import annotations

import dataclasses

import pytest

from composegen.errors import BadInput
from composegen.evidence import plan
from composegen.evidence.plancalibration import Calibration
from composegen.profiles import resolve as profile
from composegen.project import Project
from composegen.vllm import startup
from tests.support.helpers import MINIMAL

GiB = 1 << 30


@pytest.fixture
def project(repo_root) -> Project:
    return Project(repo_root)  # the shipped profiles, read only


def _report(data_dir, arm: str) -> Calibration:
    text = (data_dir / "logs" / f"vllm-0.33.0-r33-{arm}-arm.log").read_text(encoding="utf-8")
    return Calibration.of(startup.parse_startup_log(text))


def _plan(*args, **kwargs) -> dict:
    return plan.plan(*args, **kwargs).to_json()


def test_4096_arm_predicts_the_393k_gpu_profile_fits(project, data_dir):
    found = plan.plan(profile.load(project, "393k-gpu"), _report(data_dir, "4096"))
    result = found.to_json()
    predicted = result["predicted"]
    assert predicted["label"] == "predicted"
    assert predicted["gpu_tokens"] == pytest.approx(553_000, rel=0.005)
    assert predicted["concurrency"] == pytest.approx(1.41, abs=0.005)
    assert result["max_model_len"] == 393_216
    assert predicted["fits"] is True and result["verdict"] == "fits"
    assert predicted["margin_tokens"] == predicted["gpu_tokens"] - 393_216
    assert result["differences"] == [] and predicted["range"]["factor"] == 1.0
    assert (
        predicted["range"]["low_tokens"]
        == predicted["range"]["high_tokens"]
        == predicted["gpu_tokens"]
    )
    # a log does not name its image: not compared, not assumed equal
    assert "image" in result["unknown"]
    # the pool at 393K is only measured by a startup
    assert any("131,072" in note for note in result["notes"])
    assert "PREDICTED, not measured" in plan.format_text(found)


def test_planning_the_calibration_profile_reproduces_its_measurement(project, data_dir):
    text = (data_dir / "logs" / "vllm-0.33.0-r33-8192-arm.log").read_text(encoding="utf-8")
    report = startup.parse_startup_log(text)
    result = _plan(profile.load(project, "8192-131k"), Calibration.of(report))
    assert abs(result["predicted"]["gpu_tokens"] - report.kv_cache_tokens) <= 1
    assert result["predicted"]["kv_gib_per_rank"] == pytest.approx(
        report.kv_cache_gib_min, abs=1e-6
    )
    assert result["predicted"]["concurrency"] == report.max_concurrency


def test_8192_arm_warns_that_the_batch_ceiling_differs_and_widens_the_range(project, data_dir):
    result = _plan(profile.load(project, "393k-gpu"), _report(data_dir, "8192"))
    assert [d["field"] for d in result["differences"]] == ["max-num-batched-tokens"]
    assert (
        result["differences"][0]["calibration"] == 8192
        and result["differences"][0]["profile"] == 4096
    )
    assert any("max-num-batched-tokens differs" in w for w in result["warnings"])
    predicted = result["predicted"]
    # the linear model
    assert predicted["activation_gib"] == pytest.approx(1.73 * 4096 / 8192, abs=1e-3)
    factor = predicted["range"]["factor"]
    assert factor == pytest.approx(1.94861 / 1.04715, abs=1e-3)
    assert (
        predicted["range"]["low_tokens"]
        < predicted["gpu_tokens"]
        < predicted["range"]["high_tokens"]
    )
    assert predicted["range"]["high_tokens"] == int(predicted["gpu_tokens"] * factor)
    # The point estimate says no, the widened range reaches past 393,216 (the seed measured 553K): uncertain.
    assert predicted["fits"] is False and predicted["range"]["fits_high"] is True
    assert result["verdict"] == "uncertain"


def test_native_offload_host_tier_is_reported_apart(project, data_dir):
    report = _report(data_dir, "4096")
    gpu_only = _plan(profile.load(project, "393k-gpu"), report)["predicted"]
    offload = _plan(profile.load(project, "393k-offload"), report)["predicted"]
    assert offload["gpu_tokens"] == gpu_only["gpu_tokens"]
    bytes_per_token = report.kv_cache_gib_min * GiB / report.kv_cache_tokens
    assert offload["host_gib_per_rank"] == 8.0  # kv-offloading-size 16 GiB across TP 2
    assert offload["host_tokens"] == int(8 * GiB / bytes_per_token)
    assert gpu_only["host_tokens"] == 0


def test_a_bigger_gpu_adds_its_budget_share_to_kv(project, data_dir):
    report = _report(data_dir, "4096")
    r = profile.load(project, "393k-gpu")
    base = _plan(r, report)
    bigger = _plan(r, report, gpu_gib=report.gpu_total_gib + 1)
    assert bigger["inputs"]["gpu_gib_source"] == "gpu_gib"
    added = bigger["predicted"]["kv_gib_per_rank"] - base["predicted"]["kv_gib_per_rank"]
    assert added == pytest.approx(0.975, abs=1e-3)  # utilisation × 1 GiB


def test_calibration_profile_supplies_the_image(project, data_dir, tmp_path):
    report = _report(data_dir, "4096")
    same = _plan(
        profile.load(project, "393k-gpu"),
        report,
        calibration_profile=profile.load(project, "4096-131k"),
    )
    assert "image" not in same["unknown"] and same["differences"] == []
    moved = tmp_path / "profiles"
    moved.mkdir()
    for name in ("r33", "8192-131k", "4096-131k"):
        (moved / f"{name}.yaml").write_text(
            (project.profiles_dir / f"{name}.yaml").read_text(), encoding="utf-8"
        )
    text = (moved / "r33.yaml").read_text().replace("fdde59fed7f9", "0123456789ab")
    (moved / "r33.yaml").write_text(text, encoding="utf-8")
    other = profile.load(Project(tmp_path), "4096-131k")
    result = _plan(profile.load(project, "393k-gpu"), report, calibration_profile=other)
    assert [d["field"] for d in result["differences"]] == ["image"]
    assert result["predicted"]["range"]["factor"] > 1


@pytest.mark.parametrize(
    "change, message",
    [
        ({"kv_cache_tokens": None}, "kv_cache_tokens: missing"),
        ({"weights_gib": None}, "weights_gib: missing"),
        ({"gpu_total_gib": None}, "pass --gpu-gib"),
        ({"kv_cache_includes_host": True}, "GPU \\+ host"),
    ],
)
def test_incomplete_calibrations_are_bad_input(project, data_dir, change, message):
    report = dataclasses.replace(_report(data_dir, "4096"), **change)
    with pytest.raises(BadInput, match=message):
        _plan(profile.load(project, "393k-gpu"), report)


def test_calibration_from_a_log_a_log_run_and_a_stack_run(tmp_path, data_dir):
    from composegen.evidence import bundle as evidence
    from tests.support.helpers import make_project

    project = Project(make_project(tmp_path, {}, copy_shipped=True))
    log = data_dir / "logs" / "vllm-0.33.0-r33-4096-arm.log"
    report, cal = plan.calibration_from(project, log_path=log)
    assert report.kv_cache_tokens == 553_243 and cal is None and not report.emulated
    log_run = evidence.from_log(project, "4096-131k", log)
    report, cal = plan.calibration_from(project, run=log_run.name)
    # a log run cannot vouch for the image
    assert report.kv_cache_tokens == 553_243 and cal is None
    r = profile.load(project, "4096-131k")
    stack_run = evidence.write_run(
        project,
        r,
        startup_log_text=log.read_text(),
        startup_report=startup.parse_startup_log(log.read_text()),
    )
    report, cal = plan.calibration_from(project, run=stack_run)
    assert cal is not None and cal.name == "4096-131k"
    assert (
        "image"
        not in _plan(profile.load(project, "393k-gpu"), report, calibration_profile=cal)["unknown"]
    )
    with pytest.raises(BadInput, match="exactly one"):
        plan.calibration_from(project)


REAL = "real-0.26.0-h200"
TINY = MINIMAL + "  gpu-memory-utilization: 0.3\n  enforce-eager: true\n"


def _real(data_dir, name: str) -> Calibration:
    text = (data_dir / REAL / name).read_text(encoding="utf-8")
    return Calibration.of(startup.parse_startup_log(text))


def test_fp8_pool_is_predicted_from_the_bf16_recording_within_one_percent(tmp_path, data_dir):
    from tests.support.helpers import make_project

    project = Project(
        make_project(tmp_path, {"tiny-bf16": TINY, "tiny-fp8": TINY + "  kv-cache-dtype: fp8\n"})
    )
    bf16, fp8 = (
        _real(data_dir, "serve-bf16-eager.log"),
        _real(data_dir, "serve-fp8-hermes-apikey.log"),
    )
    result = _plan(profile.load(project, "tiny-fp8"), bf16)
    predicted = result["predicted"]["gpu_tokens"]
    assert predicted == pytest.approx(fp8.kv_cache_tokens, rel=0.01)  # 43,661,648 measured
    assert result["inputs"]["kv_bytes_per_token"] == pytest.approx(
        result["calibration"]["kv_bytes_per_token"] / 2, abs=0.1
    )
    assert {"field": "kv-cache-dtype", "calibration": "auto", "profile": "fp8"} in result[
        "differences"
    ]
    assert any("scaled ×0.5" in w for w in result["warnings"])
    same = _plan(profile.load(project, "tiny-bf16"), bf16)["predicted"]["gpu_tokens"]
    assert abs(same - bf16.kv_cache_tokens) <= 1  # planning the calibration reproduces it
    back = _plan(profile.load(project, "tiny-bf16"), fp8)["predicted"]["gpu_tokens"]
    assert back == pytest.approx(bf16.kv_cache_tokens, rel=0.01)  # and the other way round
    import jsonschema

    from composegen.cli import reports

    jsonschema.validate(result, reports.schema("plan"))


def test_a_log_that_does_not_state_the_batch_ceiling_assumes_nothing(project, data_dir):
    text = (data_dir / "logs" / "vllm-0.33.0-r33-4096-arm.log").read_text(encoding="utf-8")
    minimal = "\n".join(line for line in text.splitlines() if "non-default args" not in line)
    report = Calibration.of(startup.parse_startup_log(minimal))
    assert report.effective_args is None
    found = plan.plan(profile.load(project, "393k-gpu"), report)
    result = found.to_json()
    predicted = result["predicted"]
    assert result["calibration"]["max_num_batched_tokens"] is None
    # measured, not scaled from 8192
    assert predicted["activation_gib"] == report.peak_activation_gib
    # what the measured pool gives
    assert predicted["concurrency"] == pytest.approx(1.41, abs=0.005)
    assert (
        predicted["range"]["factor"] > 1
        and predicted["range"]["low_tokens"] < predicted["gpu_tokens"]
    )
    assert any("not stated" in w and "nothing assumed" in w for w in result["warnings"])
    assert "unstated batched tokens" in plan.format_text(found)
