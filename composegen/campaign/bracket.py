"""The bracket check: the control replayed after the candidate must reproduce the first control's
engine-reported figures, or the A/B compares against a stale baseline.

Figures: KV tokens, KV GiB per rank (every rank), peak activation and weights per rank. Within a
relative tolerance (`--bracket-tolerance`, default 1%); exact (0) when both control runs were
emulated, whose memory model is deterministic. A figure unknown on either side fails: an unverified
baseline is not one.
"""

from __future__ import annotations

from typing import Any

from composegen.campaign.reports import BracketFigure, BracketResult
from composegen.evidence.compare import numeric
from composegen.evidence.reports.bundle import LoadedRun

DEFAULT_TOLERANCE = 0.01
# (figure: a StartupFacts field, label)
FIGURES = (
    ("kv_cache_tokens", "Engine-reported GPU KV tokens"),
    ("kv_cache_gib_per_rank", "KV GiB per rank"),
    ("peak_activation_gib", "Peak activation per rank"),
    ("weights_gib", "Weight allocation per rank"),
)


def _rel(a: float, b: float) -> float:
    if a == b:
        return 0.0
    return abs(b - a) / abs(a) if a else float("inf")


def _diff(first: Any, replay: Any) -> float | None:
    if isinstance(first, list) and isinstance(replay, list):
        if not first or len(first) != len(replay) or not all(numeric(v) for v in [*first, *replay]):
            return None
        return max(_rel(a, b) for a, b in zip(first, replay, strict=True))
    if numeric(first) and numeric(replay):
        return _rel(first, replay)
    return None


def check(first: LoadedRun, replay: LoadedRun, *, tolerance: float | None = None) -> BracketResult:
    """FIRST and REPLAY: the two control bundles' evidence (bundle.load_run)."""
    exact = first.emulated and replay.emulated and tolerance is None
    tol = 0.0 if exact else (DEFAULT_TOLERANCE if tolerance is None else tolerance)
    rows = []
    for key, label in FIGURES:
        a, b = getattr(first.startup, key), getattr(replay.startup, key)
        diff = _diff(a, b)
        passed = diff is not None and (diff == 0 if tol == 0 else diff <= tol)
        rows.append(
            BracketFigure(
                figure=key,
                label=label,
                first=a,
                replay=b,
                max_rel_diff=None if diff is None or diff == float("inf") else round(diff, 6),
                passed=passed,
            )
        )
    return BracketResult(
        passed=all(r.passed for r in rows), tolerance=tol, exact=tol == 0, figures=rows
    )


def sentence(result: BracketResult | None, control: str) -> str:
    """RESULT: the `bracket` of the sanitized comparison (what campaign.md is written from)."""
    if result is None:
        return (
            f"No bracketed replay of {control} was run, so a stale baseline is not ruled out "
            "(`campaign run --bracket`)."
        )
    how = "exactly" if result.exact else f"within {result.tolerance * 100:g}%"
    if result.passed and result.replay == "wake":
        return (
            f"The bracketed replay of {control} woke its engine from sleep (standby) instead of "
            f"starting it again, and reproduced the baseline ({len(result.figures)} engine-reported "
            f"figures equal {how}): the figures survived a sleep/wake cycle; a second cold start "
            "was not run."
        )
    if result.passed:
        return (
            f"A fresh bracketed replay reproduced the {control} baseline ({len(result.figures)} engine-reported "
            f"figures equal {how}), so this is not a stale-log comparison."
        )
    drifted = ", ".join(f.label for f in result.figures if not f.passed)
    return (
        f"The bracketed replay of {control} did NOT reproduce its baseline ({drifted} differ by more than "
        f"{'nothing' if result.exact else format(result.tolerance * 100, 'g') + '%'}): "
        "the baseline drifted and this comparison is not trustworthy."
    )
