"""Capacity plan: predict a profile's KV pool from one measured startup (the calibration).

`plan(r, calibration, *, gpu_gib=None, calibration_profile=None) -> dict`. Everything under
"predicted" is a model output, never a measurement; "calibration" holds what the calibration run's
log stated.

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

`calibration_from(project, *, run=None, log_path=None) -> (report, calibration_profile | None)`: the
calibration for CLI `plan NAME --from RUN | --from-log FILE`. A run's profile is passed on only when
the run came from a stack and the profile is unchanged since (else its image would be a guess).

Result: reports.plan.PlanResult (`composegen schema --report plan`).
"""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

from composegen.errors import BadInput
from composegen.evidence import bundle
from composegen.evidence.reports.plan import (
    PlanCalibration,
    PlanDifference,
    PlanInputs,
    PlanPredicted,
    PlanRange,
    PlanResult,
)
from composegen.profiles import resolve
from composegen.profiles.resolved import Resolved
from composegen.project import Project
from composegen.units import format_gib
from composegen.vllm import startup
from composegen.vllm.kvcache import kv_element_bytes

GiB = 1 << 30
SEED_BYTES_PCT, SEED_TOKENS_PCT = 4.715, 94.861
RANGE_FACTOR = round((1 + SEED_TOKENS_PCT / 100) / (1 + SEED_BYTES_PCT / 100), 3)  # 1.861
# Profile flag name -> effective_args key, for the fields that change cache geometry or accounting.
GEOMETRY_FLAGS = {
    "kv-cache-dtype": "kv_cache_dtype",
    "block-size": "block_size",
    "tensor-parallel-size": "tensor_parallel_size",
    "decode-context-parallel-size": "decode_context_parallel_size",
    "max-num-batched-tokens": "max_num_batched_tokens",
}
_UNKNOWN = object()


def _require(calibration: dict, key: str) -> Any:
    value = calibration.get(key)
    if value is None:
        raise BadInput(f"calibration: {key}: missing (the startup log did not state it)")
    return value


def _profile_value(r: Resolved, flag: str) -> Any:
    value = r.flag(flag)
    return value if value is not None else r.catalog.get(flag).default


def _calibration_value(
    calibration: dict, key: str, flag: str | None, cal_profile: Resolved | None, r: Resolved
) -> Any:
    """What the calibration ran with: its effective args (absent = the catalog default, as vLLM logs
    only non-default args), else the calibration profile, else unknown."""
    args = calibration.get("effective_args")
    if isinstance(args, dict):
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
        return _profile_value(cal_profile, flag) if flag else _UNKNOWN
    return _UNKNOWN


def _compare_geometry(
    calibration: dict, r: Resolved, cal_profile: Resolved | None
) -> tuple[list[PlanDifference], list[str]]:
    fields: list[tuple[str, str, str | None, Any]] = [
        ("model", "model", None, r.profile.model.path or r.profile.model.id),
        ("revision", "revision", None, r.profile.model.revision),
    ]
    fields += [(flag, key, flag, _profile_value(r, flag)) for flag, key in GEOMETRY_FLAGS.items()]
    differences: list[PlanDifference] = []
    unknown: list[str] = []
    for name, key, flag, wanted in fields:
        had = _calibration_value(calibration, key, flag, cal_profile, r)
        if had is _UNKNOWN:
            unknown.append(name)
        elif str(had) != str(wanted):
            differences.append(PlanDifference(field=name, calibration=had, profile=wanted))
    if cal_profile is None:
        unknown.append("image")
    elif cal_profile.profile.image != r.profile.image:
        differences.append(
            PlanDifference(
                field="image", calibration=cal_profile.profile.image, profile=r.profile.image
            )
        )
    return differences, unknown


def _batch(value: Any, what: str, warnings: list[str]) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    warnings.append(
        f"{what} max-num-batched-tokens is not stated (left to the engine): nothing assumed; the measured "
        f"activation is kept as the estimate and the range widened ×{RANGE_FACTOR}"
    )
    return None


def _dtype(value: Any) -> str | None:
    return None if value is _UNKNOWN or value is None else str(value)


MAX_GPU_GIB = 65536  # 64 TiB on one device: beyond any GPU, and every figure below stays finite


def check_gpu_gib(gpu_gib: float | None) -> None:
    if gpu_gib is not None and not (math.isfinite(gpu_gib) and 0 < gpu_gib <= MAX_GPU_GIB):
        raise BadInput(
            f"--gpu-gib: {gpu_gib}: GPU memory in GiB, a number above 0 and at most {MAX_GPU_GIB}"
        )


def plan(
    r: Resolved,
    calibration: dict,
    *,
    gpu_gib: float | None = None,
    calibration_profile: Resolved | None = None,
) -> PlanResult:
    check_gpu_gib(gpu_gib)
    if calibration.get("kv_cache_includes_host"):
        raise BadInput(
            "calibration: kv_cache_tokens: counts GPU + host tokens, so bytes per token cannot be "
            "read from it; calibrate with a GPU-only run"
        )
    weights = float(_require(calibration, "weights_gib"))
    act_cal = float(_require(calibration, "peak_activation_gib"))
    kv_cal = float(_require(calibration, "kv_cache_gib_min"))
    tokens_cal = int(_require(calibration, "kv_cache_tokens"))
    if tokens_cal <= 0 or kv_cal <= 0:
        raise BadInput(
            f"calibration: kv_cache_tokens / kv_cache_gib_min: must be positive, got {tokens_cal} / {kv_cal}"
        )
    gpu_cal = calibration.get("gpu_total_gib")
    gpu = gpu_gib if gpu_gib is not None else gpu_cal
    if gpu is None:
        raise BadInput(
            "calibration: gpu_total_gib: missing (the log did not state it); pass --gpu-gib"
        )
    if gpu <= 0:
        raise BadInput(f"--gpu-gib: must be positive, got {gpu}")
    warnings: list[str] = []
    util_cal = calibration.get("gpu_memory_utilization") or _calibration_value(
        calibration, "gpu_memory_utilization", "gpu-memory-utilization", calibration_profile, r
    )
    if util_cal is _UNKNOWN:
        raise BadInput("calibration: gpu_memory_utilization: missing; give the calibration profile")
    # The calibration's own budget is measured on its GPU; "other" must come from that same budget.
    other = (
        float(util_cal) * float(gpu_cal if gpu_cal is not None else gpu)
        - weights
        - act_cal
        - kv_cal
    )
    batch_cal = _batch(
        _calibration_value(
            calibration, "max_num_batched_tokens", "max-num-batched-tokens", calibration_profile, r
        ),
        "the calibration's",
        warnings,
    )
    batch_r = _batch(r.flag("max-num-batched-tokens"), f"profile {r.name}'s", warnings)
    util_r = float(_profile_value(r, "gpu-memory-utilization"))
    max_len = r.flag("max-model-len")
    if not isinstance(max_len, int) or max_len <= 0:
        raise BadInput(
            f"{r.path}: vllm.max-model-len: plan needs a fixed max-model-len, got {max_len!r}"
        )
    tp = int(_profile_value(r, "tensor-parallel-size") or 1)
    offload_gib = float(r.flag("kv-offloading-size") or 0)

    dtype_cal = _dtype(
        _calibration_value(calibration, "kv_cache_dtype", "kv-cache-dtype", calibration_profile, r)
    )
    dtype_r = str(_profile_value(r, "kv-cache-dtype") or "auto")
    bytes_per_token_cal = kv_cal * GiB / tokens_cal
    bytes_per_token = bytes_per_token_cal
    if dtype_cal is not None:
        bytes_per_token *= kv_element_bytes(dtype_r) / kv_element_bytes(dtype_cal)
    batches_known = batch_cal is not None and batch_r is not None
    activation = (
        act_cal * batch_r / batch_cal if batch_cal is not None and batch_r is not None else act_cal
    )
    kv = util_r * gpu - weights - activation - other
    gpu_tokens = max(0, math.floor(kv * GiB / bytes_per_token))
    host_gib = offload_gib / tp
    host_tokens = math.floor(host_gib * GiB / bytes_per_token)

    differences, unknown = _compare_geometry(calibration, r, calibration_profile)
    widening = [d for d in differences if d.field != "kv-cache-dtype"]
    factor = RANGE_FACTOR if widening or not batches_known else 1.0
    low, high = math.floor(gpu_tokens / factor), math.floor(gpu_tokens * factor)
    for d in differences:
        if d.field == "kv-cache-dtype":
            warnings.append(
                f"kv-cache-dtype differs from the calibration ({d.calibration} → {d.profile}): bytes per "
                f"token scaled ×{bytes_per_token / bytes_per_token_cal:g} by the KV element size"
            )
            continue
        warnings.append(
            f"{d.field} differs from the calibration ({d.calibration} → {d.profile}): KV bytes "
            f"per token may not carry over; range widened ×{RANGE_FACTOR} both ways (seed: KV bytes "
            f"+{SEED_BYTES_PCT}% gave tokens +{SEED_TOKENS_PCT}%)"
        )
    if kv <= 0:
        warnings.append(
            f"predicted KV memory is {format_gib(kv)}: weights and activation exceed the budget"
        )
    notes = []
    cal_len = calibration.get("max_model_len")
    if cal_len and cal_len != max_len:
        notes.append(
            f"the calibration ran at max-model-len {cal_len:,}, this profile asks {max_len:,}: only a "
            "startup at that length measures its pool (qualify)"
        )
    if offload_gib:
        notes.append(
            f"host tier {host_gib:g} GiB per rank ({host_tokens:,} tokens at the calibration's bytes/token) "
            "holds offloaded blocks; it is not counted toward fitting one request"
        )
    fits = gpu_tokens >= max_len
    fits_low, fits_high = low >= max_len, high >= max_len
    verdict = "fits" if fits_low else ("does not fit" if not fits_high else "uncertain")
    return PlanResult(
        profile=r.name,
        max_model_len=max_len,
        calibration=PlanCalibration(
            gpu_total_gib=gpu_cal,
            gpu_memory_utilization=util_cal,
            weights_gib=weights,
            peak_activation_gib=act_cal,
            kv_cache_gib_min=kv_cal,
            kv_cache_tokens=tokens_cal,
            max_num_batched_tokens=batch_cal,
            max_model_len=cal_len,
            other_gib=round(other, 4),
            kv_bytes_per_token=round(bytes_per_token_cal, 1),
            kv_cache_dtype=dtype_cal,
            emulated=bool(calibration.get("emulated")),
        ),
        inputs=PlanInputs(
            gpu_gib=gpu,
            gpu_gib_source="gpu_gib" if gpu_gib is not None else "calibration",
            gpu_memory_utilization=util_r,
            max_num_batched_tokens=batch_r,
            kv_offloading_size_gib=offload_gib,
            tensor_parallel_size=tp,
            kv_cache_dtype=dtype_r,
            kv_bytes_per_token=round(bytes_per_token, 1),
        ),
        predicted=PlanPredicted(
            label="predicted",
            activation_gib=round(activation, 3),
            kv_gib_per_rank=round(kv, 3),
            gpu_tokens=gpu_tokens,
            host_gib_per_rank=round(host_gib, 3),
            host_tokens=host_tokens,
            concurrency=round(gpu_tokens / max_len, 2),
            fits=fits,
            margin_tokens=gpu_tokens - max_len,
            margin_pct=round((gpu_tokens - max_len) / max_len * 100, 2),
            range=PlanRange(
                low_tokens=low,
                high_tokens=high,
                factor=factor,
                fits_low=fits_low,
                fits_high=fits_high,
            ),
        ),
        verdict=verdict,
        differences=differences,
        unknown=unknown,
        warnings=warnings,
        notes=notes,
    )


def calibration_from(
    project: Project, *, run: str | Path | None = None, log_path: str | Path | None = None
) -> tuple[dict, Resolved | None]:
    if (run is None) == (log_path is None):
        raise BadInput("plan: give exactly one of --from RUN or --from-log FILE")
    if log_path is not None:
        # a regular file or a pipe, bounded (never /dev/zero whole)
        data = bundle.read_log(Path(log_path))
        return startup.parse_startup_stream(io.BytesIO(data)).to_json(), None
    assert run is not None  # exactly one of the two was given (checked above)
    doc = bundle.load_run(run, project.root)
    # the figures' origin goes along
    measured = {**doc["startup"], "emulated": bool(doc.get("emulated"))}
    if doc["source"] != "stack":
        return measured, None
    try:
        cal = resolve.load(project, doc["profile"]["name"])
    except BadInput:
        return measured, None
    return measured, cal if cal.hash == doc["profile"]["hash"] else None


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
