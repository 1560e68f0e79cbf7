"""Capacity plan: predict a profile's KV pool from one measured startup (the calibration).

Everything under "predicted" is a model output, never a measurement; "calibration" holds what the
calibration run's log stated.

The model, per TP rank, in GiB (a linear model, not vLLM's profiler):
  gpu            = gpu_gib if given, else the calibration's gpu_total_gib
  other          = util_cal × gpu − weights − activation_cal − kv_cal   (what the calibration's budget held
                   beyond weights, activation and KV: CUDA graphs, non-torch memory, rounding;
                   assumed fixed)
  activation     = activation_cal × batch_r / batch_cal   (peak activation taken as proportional to
                   max-num-batched-tokens; the seed's 8,192 → 4,096 A/B measured 1.73 → 1.14, so
                   this model is rough: it predicts 0.87 and the intercept is unknown). When either
                   side's max-num-batched-tokens is not stated (left to the engine), nothing is
                   assumed: the measured activation is the point estimate and the range is widened
  kv             = util_r × gpu − weights − activation − other
  bytes/token    = kv_cache_gib_min × 2^30 / kv_cache_tokens of the calibration, × element bytes of r's
                   kv-cache-dtype / element bytes of the calibration's (fp8 = 1, auto/bf16/fp16 = 2:
                   a real 0.26.0 H200 start held 21,847,200 bf16 and 43,661,648 fp8 tokens in the
                   same memory)
  gpu_tokens     = floor(kv × 2^30 / bytes/token); concurrency = gpu_tokens / max-model-len of r
  host (native offload) = kv-offloading-size / tensor-parallel-size GiB per rank at the same bytes/token,
                   reported apart: a request must still fit in the GPU pool, so `fits` uses gpu_tokens.
Verdict: fits when gpu_tokens ≥ max-model-len; margin = gpu_tokens − max-model-len.

Range: when the calibration differs from r in anything that changes cache geometry or accounting
(model, revision, image, block-size, tensor- or decode-context-parallel size,
max-num-batched-tokens), bytes/token may not carry over (a kv-cache-dtype difference is scaled as
above, listed, and does not widen the range). The seed A/B changed only the batch ceiling and saw KV
bytes +4.715% but tokens +94.861%: tokens per byte moved by (1.94861 / 1.04715) = 1.861×. The range
is [point / 1.861, point × 1.861] (one factor however many fields differ); without differences low =
high. Fields the calibration cannot tell (e.g. the image, from a log) are listed in "unknown", not
assumed to differ. verdict: "fits" / "does not fit" when the whole range agrees, else "uncertain".

`calibration_from` (`plan NAME --from RUN | --from-log FILE`) passes a run's profile on only when
the run came from a stack and the profile is unchanged since (else its image would be a guess).

The steps live apart: plancalibration.py reads the calibration, plangeometry.py compares the cache
geometry and sizes the range, and this module predicts the pool and gives the verdict.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from pathlib import Path

from composegen.errors import BadInput
from composegen.evidence import bundle
from composegen.evidence.plancalibration import (
    Calibrated,
    Calibration,
    GiB,
    batch,
    calibrate,
    profile_value,
)
from composegen.evidence.plangeometry import compare_geometry, difference_warnings, range_factor
from composegen.evidence.reports.plan import (
    PlanCalibration,
    PlanInputs,
    PlanPredicted,
    PlanRange,
    PlanResult,
)
from composegen.profiles import resolve
from composegen.profiles.resolved import Resolved
from composegen.project import Project
from composegen.sizing.models import kv_element_bytes
from composegen.units import format_gib
from composegen.vllm import startup

MAX_GPU_GIB = 65536  # 64 TiB on one device: beyond any GPU, and every figure below stays finite


def check_gpu_gib(gpu_gib: float | None) -> None:
    if gpu_gib is not None and not (math.isfinite(gpu_gib) and 0 < gpu_gib <= MAX_GPU_GIB):
        msg = f"--gpu-gib: {gpu_gib}: GPU memory in GiB, a number above 0 and at most {MAX_GPU_GIB}"
        raise BadInput(msg)


@dataclass(frozen=True)
class _Asked:
    """What profile r asks of each TP rank, with the calibration's bytes/token carried over."""

    utilization: float
    batch: int | None
    max_len: int
    tp: int
    offload_gib: float
    dtype: str
    bytes_per_token: float

    @property
    def host_gib(self) -> float:
        return self.offload_gib / self.tp

    @property
    def host_tokens(self) -> int:
        return math.floor(self.host_gib * GiB / self.bytes_per_token)


def _asked(r: Resolved, cal: Calibrated, warnings: list[str]) -> _Asked:
    batch_r = batch(r.flag("max-num-batched-tokens"), f"profile {r.name}'s", warnings)
    util_r = float(profile_value(r, "gpu-memory-utilization"))
    max_len = r.flag("max-model-len")
    if not isinstance(max_len, int) or max_len <= 0:
        msg = f"{r.path}: vllm.max-model-len: plan needs a fixed max-model-len, got {max_len!r}"
        raise BadInput(msg)
    dtype_r = str(profile_value(r, "kv-cache-dtype") or "auto")
    bytes_per_token = cal.bytes_per_token
    if cal.dtype is not None:
        bytes_per_token *= kv_element_bytes(dtype_r) / kv_element_bytes(cal.dtype)
    return _Asked(
        utilization=util_r,
        batch=batch_r,
        max_len=max_len,
        tp=int(profile_value(r, "tensor-parallel-size") or 1),
        offload_gib=float(r.flag("kv-offloading-size") or 0),
        dtype=dtype_r,
        bytes_per_token=bytes_per_token,
    )


@dataclass(frozen=True)
class _Pool:
    """The model's output per TP rank: activation and KV in GiB, the GPU pool in tokens."""

    activation: float
    kv: float
    gpu_tokens: int


def _pool(cal: Calibrated, asked: _Asked) -> _Pool:
    activation = (
        cal.activation * asked.batch / cal.batch
        if cal.batch is not None and asked.batch is not None
        else cal.activation
    )
    kv = asked.utilization * cal.gpu - cal.weights - activation - cal.other
    return _Pool(activation, kv, max(0, math.floor(kv * GiB / asked.bytes_per_token)))


def _predicted(pool: _Pool, asked: _Asked, factor: float) -> PlanPredicted:
    tokens, max_len = pool.gpu_tokens, asked.max_len
    low, high = math.floor(tokens / factor), math.floor(tokens * factor)
    return PlanPredicted(
        label="predicted",
        activation_gib=round(pool.activation, 3),
        kv_gib_per_rank=round(pool.kv, 3),
        gpu_tokens=tokens,
        host_gib_per_rank=round(asked.host_gib, 3),
        host_tokens=asked.host_tokens,
        concurrency=round(tokens / max_len, 2),
        fits=tokens >= max_len,
        margin_tokens=tokens - max_len,
        margin_pct=round((tokens - max_len) / max_len * 100, 2),
        range=PlanRange(
            low_tokens=low,
            high_tokens=high,
            factor=factor,
            fits_low=low >= max_len,
            fits_high=high >= max_len,
        ),
    )


def _verdict(predicted: PlanPredicted) -> str:
    """fits / does not fit when the whole range agrees, else uncertain."""
    if predicted.range.fits_low:
        return "fits"
    return "does not fit" if not predicted.range.fits_high else "uncertain"


def _notes(calibration: Calibration, asked: _Asked) -> list[str]:
    notes = []
    cal_len = calibration.max_model_len
    if cal_len and cal_len != asked.max_len:
        notes.append(
            f"the calibration ran at max-model-len {cal_len:,}, this profile asks {asked.max_len:,}: only a "
            "startup at that length measures its pool (qualify)"
        )
    if asked.offload_gib:
        notes.append(
            f"host tier {asked.host_gib:g} GiB per rank ({asked.host_tokens:,} tokens at the "
            "calibration's bytes/token) holds offloaded blocks; it is not counted toward fitting one request"
        )
    return notes


def _calibration_report(cal: Calibrated, calibration: Calibration) -> PlanCalibration:
    return PlanCalibration(
        gpu_total_gib=cal.gpu_total,
        gpu_memory_utilization=cal.utilization,
        weights_gib=cal.weights,
        peak_activation_gib=cal.activation,
        kv_cache_gib_min=cal.kv,
        kv_cache_tokens=cal.tokens,
        max_num_batched_tokens=cal.batch,
        max_model_len=calibration.max_model_len,
        other_gib=round(cal.other, 4),
        kv_bytes_per_token=round(cal.bytes_per_token, 1),
        kv_cache_dtype=cal.dtype,
        emulated=calibration.emulated,
    )


def _inputs_report(cal: Calibrated, asked: _Asked, gpu_gib: float | None) -> PlanInputs:
    return PlanInputs(
        gpu_gib=cal.gpu,
        gpu_gib_source="gpu_gib" if gpu_gib is not None else "calibration",
        gpu_memory_utilization=asked.utilization,
        max_num_batched_tokens=asked.batch,
        kv_offloading_size_gib=asked.offload_gib,
        tensor_parallel_size=asked.tp,
        kv_cache_dtype=asked.dtype,
        kv_bytes_per_token=round(asked.bytes_per_token, 1),
    )


def plan(
    r: Resolved,
    calibration: Calibration,
    *,
    gpu_gib: float | None = None,
    calibration_profile: Resolved | None = None,
) -> PlanResult:
    """Calibration (what the startup stated), the pool the model predicts for r, the geometry
    (what differs, how far the range widens), then the verdict."""
    check_gpu_gib(gpu_gib)
    warnings: list[str] = []
    cal = calibrate(r, calibration, gpu_gib, calibration_profile, warnings)
    asked = _asked(r, cal, warnings)
    pool = _pool(cal, asked)
    differences, unknown = compare_geometry(calibration, r, calibration_profile)
    factor = range_factor(differences, cal.batch is not None and asked.batch is not None)
    warnings += difference_warnings(differences, asked.bytes_per_token / cal.bytes_per_token)
    if pool.kv <= 0:
        warnings.append(
            f"predicted KV memory is {format_gib(pool.kv)}: weights and activation exceed the budget"
        )
    predicted = _predicted(pool, asked, factor)
    return PlanResult(
        profile=r.name,
        max_model_len=asked.max_len,
        calibration=_calibration_report(cal, calibration),
        inputs=_inputs_report(cal, asked, gpu_gib),
        predicted=predicted,
        verdict=_verdict(predicted),
        differences=differences,
        unknown=unknown,
        warnings=warnings,
        notes=_notes(calibration, asked),
    )


def calibration_from(
    project: Project, *, run: str | Path | None = None, log_path: str | Path | None = None
) -> tuple[Calibration, Resolved | None]:
    if (run is None) == (log_path is None):
        raise BadInput("plan: give exactly one of --from RUN or --from-log FILE")
    if log_path is not None:
        # a regular file or a pipe, bounded (never /dev/zero whole)
        data = bundle.read_log(Path(log_path))
        return Calibration.of(startup.parse_startup_stream(io.BytesIO(data))), None
    assert run is not None  # exactly one of the two was given (checked above)
    doc = bundle.load_run(run, project.root)
    # the startup report as the bundle holds it; the figures' origin goes along
    measured = Calibration.of(doc.startup, emulated=doc.emulated)
    if doc.source != "stack":
        return measured, None
    try:
        cal = resolve.load(project, doc.profile.name)
    except BadInput:
        return measured, None
    return measured, cal if cal.hash == doc.profile.hash else None


def format_text(result: PlanResult) -> str:
    p, c, i = result.predicted, result.calibration, result.inputs
    rng = p.range
    emulated = c.emulated
    origin = "from an EMULATED calibration" if emulated else "not measured"
    calibrated = "EMULATED vLLM, not a model" if emulated else "measured"
    lines = [
        f"capacity plan for {result.profile} (max-model-len {result.max_model_len:,}) — PREDICTED, {origin}",
        f"  calibration ({calibrated}): weights {c.weights_gib} GiB, activation {c.peak_activation_gib} GiB at "
        f"{c.max_num_batched_tokens or 'unstated'} batched tokens, KV {c.kv_cache_gib_min} GiB = "
        f"{c.kv_cache_tokens:,} tokens ({c.kv_bytes_per_token:,.0f} bytes/token, "
        f"{c.kv_cache_dtype or 'unknown dtype'}), other {c.other_gib:+.3f} GiB",
        f"  inputs: GPU {i.gpu_gib} GiB ({i.gpu_gib_source}), utilisation {i.gpu_memory_utilization}, "
        f"{i.max_num_batched_tokens or 'unstated'} batched tokens, TP {i.tensor_parallel_size}, "
        f"KV {i.kv_cache_dtype} at {i.kv_bytes_per_token:,.0f} bytes/token",
        f"  predicted activation {p.activation_gib} GiB, KV {p.kv_gib_per_rank} GiB per rank",
        f"  predicted GPU pool   {p.gpu_tokens:,} tokens, concurrency {p.concurrency:.2f}x, "
        f"margin {p.margin_tokens:+,} ({p.margin_pct:+.2f}%)",
    ]
    if i.kv_offloading_size_gib:
        lines.append(
            f"  predicted host tier  {p.host_tokens:,} tokens ({p.host_gib_per_rank} GiB per rank)"
        )
    if rng.factor != 1.0:
        lines.append(
            f"  predicted range      {rng.low_tokens:,} – {rng.high_tokens:,} tokens (×{rng.factor})"
        )
    lines.append(f"verdict (predicted): {result.verdict}")
    lines += [f"warning: {w}" for w in result.warnings]
    if result.unknown:
        lines.append(f"not compared (the calibration does not say): {', '.join(result.unknown)}")
    lines += [f"note: {n}" for n in result.notes]
    return "\n".join(lines) + "\n"
