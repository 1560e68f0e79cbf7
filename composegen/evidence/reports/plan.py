"""The `plan` report's shape (composegen schema --report plan); evidence/plan.py fills it."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from composegen.report import Report


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PlanCalibration(_Part):
    """What the calibration run's log stated (measured), plus what the model derives from it."""

    gpu_total_gib: float | None
    gpu_memory_utilization: float
    weights_gib: float
    peak_activation_gib: float
    kv_cache_gib_min: float
    kv_cache_tokens: int
    max_num_batched_tokens: int | None  # null: the calibration does not say (left to the engine)
    max_model_len: int | None
    other_gib: float
    kv_bytes_per_token: float
    kv_cache_dtype: str | None  # null: unknown
    # the calibration run was on the emulated vLLM (a test double), not a model
    emulated: bool = False


class PlanInputs(_Part):
    gpu_gib: float
    gpu_gib_source: str  # "calibration" | "gpu_gib"
    gpu_memory_utilization: float
    max_num_batched_tokens: int | None
    kv_offloading_size_gib: float
    tensor_parallel_size: int
    kv_cache_dtype: str
    kv_bytes_per_token: float  # the calibration's, scaled by the KV element size of both dtypes


class PlanRange(_Part):
    low_tokens: int
    high_tokens: int
    factor: float
    fits_low: bool
    fits_high: bool


class PlanPredicted(_Part):
    label: str  # always "predicted": a model output, never a measurement
    activation_gib: float
    kv_gib_per_rank: float
    gpu_tokens: int
    host_gib_per_rank: float
    host_tokens: int
    concurrency: float
    fits: bool
    margin_tokens: int
    margin_pct: float
    range: PlanRange


class PlanDifference(_Part):
    field: str
    calibration: Any
    profile: Any


class PlanResult(Report):
    profile: str
    max_model_len: int
    calibration: PlanCalibration
    inputs: PlanInputs
    predicted: PlanPredicted
    verdict: str  # "fits" | "does not fit" | "uncertain"
    differences: list[PlanDifference]
    unknown: list[str]
    warnings: list[str]
    notes: list[str]
