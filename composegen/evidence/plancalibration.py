"""The calibration side of a capacity plan: what one measured startup stated, read as the model
needs it (evidence/plan.py documents the model).

`Calibration.of(startup, emulated)` takes the figures the plan reads from a startup report (a log
parsed now, or a run's bundle), once. `calibrate(r, calibration, gpu_gib, calibration_profile,
warnings) -> Calibrated` checks the figures the model cannot do without (each a one-line BadInput
naming the missing field) and derives the calibration's "other" memory and KV bytes per token. What
the calibration ran with is read from its effective args, else from its profile, else it is UNKNOWN
(never assumed equal).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from composegen.errors import BadInput
from composegen.evidence.reports.bundle import StartupFacts
from composegen.profiles.resolved import Resolved
from composegen.vllm.reports import StartupReport

GiB = 1 << 30
SEED_BYTES_PCT, SEED_TOKENS_PCT = 4.715, 94.861
RANGE_FACTOR = round((1 + SEED_TOKENS_PCT / 100) / (1 + SEED_BYTES_PCT / 100), 3)  # 1.861
UNKNOWN = object()


@dataclass(frozen=True)
class Calibration:
    """What one measured startup stated, as the plan reads it (None: the log did not say)."""

    weights_gib: float | None = None
    peak_activation_gib: float | None = None
    kv_cache_gib_min: float | None = None
    kv_cache_tokens: int | None = None
    gpu_total_gib: float | None = None
    gpu_memory_utilization: float | None = None
    max_model_len: int | None = None
    kv_cache_includes_host: bool = False
    effective_args: Mapping[str, Any] | None = None
    emulated: bool = False  # the startup was the emulated vLLM's: the plan says so

    @classmethod
    def of(cls, startup: StartupReport | StartupFacts, emulated: bool = False) -> Calibration:
        """From a startup log's report, or the startup part of a run's bundle (same field names)."""
        read = [f.name for f in fields(cls) if f.name != "emulated"]
        return cls(**{name: getattr(startup, name) for name in read}, emulated=emulated)


def require(value: Any, key: str) -> Any:
    if value is None:
        raise BadInput(f"calibration: {key}: missing (the startup log did not state it)")
    return value


def profile_value(r: Resolved, flag: str) -> Any:
    value = r.flag(flag)
    return value if value is not None else r.catalog.get(flag).default


def calibration_value(
    calibration: Calibration, key: str, flag: str | None, cal_profile: Resolved | None, r: Resolved
) -> Any:
    """What the calibration ran with: its effective args (absent = the catalog default, as vLLM logs
    only non-default args), else the calibration profile, else unknown."""
    args = calibration.effective_args
    if args is not None:
        if key in args:
            value = args[key]
            return value[0] if isinstance(value, list) and len(value) == 1 else value
        if key == "model" and "model_tag" in args:
            return args["model_tag"]
        if flag:
            return r.catalog.get(flag).default
    if cal_profile is not None:
        if key == "model":
            return cal_profile.profile.model.path or cal_profile.profile.model.id
        if key == "revision":
            return cal_profile.profile.model.revision
        return profile_value(cal_profile, flag) if flag else UNKNOWN
    return UNKNOWN


def batch(value: Any, what: str, warnings: list[str]) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    warnings.append(
        f"{what} max-num-batched-tokens is not stated (left to the engine): nothing assumed; the measured "
        f"activation is kept as the estimate and the range widened ×{RANGE_FACTOR}"
    )
    return None


def dtype(value: Any) -> str | None:
    return None if value is UNKNOWN or value is None else str(value)


@dataclass(frozen=True)
class Calibrated:
    """The calibration's figures, per TP rank, in GiB (gpu: the GPU the plan is for)."""

    weights: float
    activation: float
    kv: float
    tokens: int
    gpu_total: Any
    gpu: Any
    utilization: Any
    other: float
    batch: int | None
    dtype: str | None
    bytes_per_token: float


def _measured(calibration: Calibration) -> tuple[float, float, float, int]:
    """weights, peak activation, KV GiB and KV tokens: what the startup log must have stated."""
    if calibration.kv_cache_includes_host:
        raise BadInput(
            "calibration: kv_cache_tokens: counts GPU + host tokens, so bytes per token cannot be "
            "read from it; calibrate with a GPU-only run"
        )
    weights = float(require(calibration.weights_gib, "weights_gib"))
    act_cal = float(require(calibration.peak_activation_gib, "peak_activation_gib"))
    kv_cal = float(require(calibration.kv_cache_gib_min, "kv_cache_gib_min"))
    tokens_cal = int(require(calibration.kv_cache_tokens, "kv_cache_tokens"))
    if tokens_cal <= 0 or kv_cal <= 0:
        msg = f"calibration: kv_cache_tokens / kv_cache_gib_min: must be positive, got {tokens_cal} / {kv_cal}"
        raise BadInput(msg)
    return weights, act_cal, kv_cal, tokens_cal


def _gpu(calibration: Calibration, gpu_gib: float | None) -> float:
    gpu = gpu_gib if gpu_gib is not None else calibration.gpu_total_gib
    if gpu is None:
        msg = "calibration: gpu_total_gib: missing (the log did not state it); pass --gpu-gib"
        raise BadInput(msg)
    if gpu <= 0:
        raise BadInput(f"--gpu-gib: must be positive, got {gpu}")
    return gpu


def calibrate(
    r: Resolved,
    calibration: Calibration,
    gpu_gib: float | None,
    calibration_profile: Resolved | None,
    warnings: list[str],
) -> Calibrated:
    weights, act_cal, kv_cal, tokens_cal = _measured(calibration)
    gpu_cal = calibration.gpu_total_gib
    gpu = _gpu(calibration, gpu_gib)
    util_cal = calibration.gpu_memory_utilization or calibration_value(
        calibration, "gpu_memory_utilization", "gpu-memory-utilization", calibration_profile, r
    )
    if util_cal is UNKNOWN:
        raise BadInput("calibration: gpu_memory_utilization: missing; give the calibration profile")
    # The calibration's own budget is measured on its GPU; "other" must come from that same budget.
    other = (
        float(util_cal) * float(gpu_cal if gpu_cal is not None else gpu)
        - weights
        - act_cal
        - kv_cal
    )
    batch_cal = batch(
        calibration_value(
            calibration, "max_num_batched_tokens", "max-num-batched-tokens", calibration_profile, r
        ),
        "the calibration's",
        warnings,
    )
    dtype_cal = dtype(
        calibration_value(calibration, "kv_cache_dtype", "kv-cache-dtype", calibration_profile, r)
    )
    return Calibrated(
        weights=weights,
        activation=act_cal,
        kv=kv_cal,
        tokens=tokens_cal,
        gpu_total=gpu_cal,
        gpu=gpu,
        utilization=util_cal,
        other=other,
        batch=batch_cal,
        dtype=dtype_cal,
        bytes_per_token=kv_cal * GiB / tokens_cal,
    )
