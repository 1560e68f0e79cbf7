"""The geometry side of a capacity plan: where the calibration differs from the profile in what
changes cache geometry or accounting, and how far that widens the predicted range
(evidence/plan.py documents the model and the seed's 1.861 factor).
"""

from __future__ import annotations

from typing import Any

from composegen.evidence.plancalibration import (
    RANGE_FACTOR,
    SEED_BYTES_PCT,
    SEED_TOKENS_PCT,
    UNKNOWN,
    Calibration,
    calibration_value,
    profile_value,
)
from composegen.evidence.reports.plan import PlanDifference
from composegen.profiles.resolved import Resolved

# Profile flag name -> effective_args key, for the fields that change cache geometry or accounting.
GEOMETRY_FLAGS = {
    "kv-cache-dtype": "kv_cache_dtype",
    "block-size": "block_size",
    "tensor-parallel-size": "tensor_parallel_size",
    "decode-context-parallel-size": "decode_context_parallel_size",
    "max-num-batched-tokens": "max_num_batched_tokens",
}


def compare_geometry(
    calibration: Calibration, r: Resolved, cal_profile: Resolved | None
) -> tuple[list[PlanDifference], list[str]]:
    fields: list[tuple[str, str, str | None, Any]] = [
        ("model", "model", None, r.profile.model.path or r.profile.model.id),
        ("revision", "revision", None, r.profile.model.revision),
    ]
    fields += [(flag, key, flag, profile_value(r, flag)) for flag, key in GEOMETRY_FLAGS.items()]
    differences: list[PlanDifference] = []
    unknown: list[str] = []
    for name, key, flag, wanted in fields:
        had = calibration_value(calibration, key, flag, cal_profile, r)
        if had is UNKNOWN:
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


def range_factor(differences: list[PlanDifference], batches_known: bool) -> float:
    """One factor however many fields differ; a kv-cache-dtype difference is scaled, not widened."""
    widening = [d for d in differences if d.field != "kv-cache-dtype"]
    return RANGE_FACTOR if widening or not batches_known else 1.0


def difference_warnings(differences: list[PlanDifference], dtype_scale: float) -> list[str]:
    warnings = []
    for d in differences:
        if d.field == "kv-cache-dtype":
            warnings.append(
                f"kv-cache-dtype differs from the calibration ({d.calibration} → {d.profile}): bytes per "
                f"token scaled ×{dtype_scale:g} by the KV element size"
            )
            continue
        warnings.append(
            f"{d.field} differs from the calibration ({d.calibration} → {d.profile}): KV bytes "
            f"per token may not carry over; range widened ×{RANGE_FACTOR} both ways (seed: KV bytes "
            f"+{SEED_BYTES_PCT}% gave tokens +{SEED_TOKENS_PCT}%)"
        )
    return warnings
