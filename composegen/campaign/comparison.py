"""comparison.json: the sanitized, machine-readable result of an A/B campaign (`composegen schema
--report comparison`). It holds figures (the compare rows and each arm's engine-reported figures),
the configuration differences, the criteria (startup, gates, ladder targets, bracket, shm), the
decision, and every raw artifact (the arms' evidence.json, logs and JSON files) by SHA-256 only.
Nothing of a raw file's free text is copied; what is left is scrubbed (sanitize.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from composegen.campaign.reports import (
    COMPARISON_SCHEMA,
    CampaignState,
    ComparisonReport,
    Criterion,
    DecisionPart,
)
from composegen.campaign.sanitize import Scrubber
from composegen.evidence.bundle import EVIDENCE, file_sha256
from composegen.evidence.reports.bundle import LoadedRun
from composegen.evidence.reports.compare import CompareReport

# StartupFacts fields
ARM_FIGURES: tuple[str, ...] = ("vllm_version", "max_model_len", "kv_cache_tokens")
ARM_FIGURES += ("kv_cache_gib_min", "kv_cache_gib_per_rank", "peak_activation_gib", "weights_gib")
ARM_FIGURES += ("max_concurrency",)


def _criteria(key: str, doc: LoadedRun, shm: int | None) -> list[Criterion]:
    """DOC: the arm's evidence (load_run): (name, measured, threshold, passed) of each check."""
    ready = doc.startup.ready
    rows: list[tuple[str, Any, Any, bool]] = [("startup", ready, True, ready)]
    gates = doc.gates.gates if doc.gates else []
    rows += [(f"gate:{g.name}", g.passed, True, g.passed) for g in gates]
    ladder = doc.ladder.targets if doc.ladder else []
    rows += [(f"ladder:{t.target}", t.prompt_tokens, t.target, t.ok) for t in ladder]
    if shm is not None:
        rows.append(("shm_reclaimable", shm, 0, shm == 0))
    return [Criterion(arm=key, name=n, measured=m, threshold=t, passed=p) for n, m, t, p in rows]


def raw_rows(key: str, doc: LoadedRun) -> list[dict[str, object]]:
    """An arm's files as a campaign's record lists them: its evidence.json, then its raw files."""
    whole = Path(doc.path) / EVIDENCE
    files: list[tuple[str, str, int | None]] = [
        (EVIDENCE, file_sha256(whole), whole.stat().st_size)
    ]
    files += [(e.file, e.sha256, e.bytes) for e in doc.raw]
    return [{"arm": key, "file": f, "sha256": h, "bytes": n} for f, h, n in files]


def build(
    state: CampaignState,
    directory: Path,
    docs: dict[str, LoadedRun],
    compared: CompareReport,
    decision: DecisionPart | None,
) -> ComparisonReport:
    """DOCS: arm key -> its bundle's evidence (load_run); COMPARED: compare_runs(control,
    candidate)."""
    raw: list[dict[str, object]] = []
    arms, criteria = [], list[Criterion]()
    for arm in state.arms:
        doc = docs.get(arm.key)
        if doc is None:
            continue
        raw += raw_rows(arm.key, doc)
        arms.append(
            {
                "arm": arm.key,
                "profile": doc.profile.name,
                "profile_hash": doc.profile.hash,
                "emulated": doc.emulated,
                "source": doc.source,
                "figures": {k: getattr(doc.startup, k) for k in ARM_FIGURES},
                "comparability": doc.comparability.to_json() if doc.comparability else None,
            }
        )
        criteria += _criteria(arm.key, doc, arm.shm_reclaimable)
    if state.bracket is not None:
        passed = state.bracket.passed
        criteria.append(
            Criterion(arm="bracket", name="bracket", measured=passed, threshold=True, passed=passed)
        )
    control = docs["control"]
    effective = control.startup.effective_args or {}
    config = compared.config
    written = {
        "schema": COMPARISON_SCHEMA,
        "campaign": state.name,
        "control": state.control,
        "candidate": state.candidate,
        "emulated": any(a["emulated"] for a in arms),
        "model": {
            "id": effective.get("model"),
            "revision": control.model_revision,
            "image_digest": control.image_digest,
        },
        # comparison.json is written: JSON from here on
        "rows": [row.to_json() for row in compared.rows],
        "arms": arms,
        "differences": {
            "functional": [
                {"path": c.path, "before": c.before, "after": c.after} for c in config.functional
            ],
            "identity": [c.path for c in config.identity],
        },
        "unexplained_capacity_change": compared.unexplained_capacity_change.to_json(),
        "comparability": compared.comparability,
        "bracket": state.bracket.to_json() if state.bracket else None,
        "bench": compared.bench.to_json() if compared.bench else None,
        "criteria": [c.to_json() for c in criteria],
        "decision": (decision or DecisionPart(decision="undecided")).to_json(),
        "raw": raw,
    }
    private = [d.container.image_id if d.container else None for d in docs.values()]
    private += [str(directory.resolve()), str(directory.resolve().parent.parent.parent)]
    scrub = Scrubber(p for p in private if p)
    # the sanitizer walks JSON: the record is checked against its model after it
    clean = scrub.json(written)
    clean["redacted"] = scrub.count
    return ComparisonReport.model_validate(clean)
