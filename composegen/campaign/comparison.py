"""comparison.json: the sanitized, machine-readable result of an A/B campaign (`composegen schema --report
comparison`). It holds figures (the compare rows and each arm's engine-reported figures), the configuration
differences, the criteria (startup, gates, ladder targets, bracket, shm), the decision, and every raw
artifact (the arms' evidence.json, logs and JSON files) by SHA-256 only. Nothing of a raw file's free text
is copied; what is left is scrubbed (sanitize.py).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import Field

from composegen.campaign.bracket import BracketResult
from composegen.campaign.sanitize import Scrubber
from composegen.campaign.state import CampaignState
from composegen.evidence.compare import CapacityChange, CompareRow
from composegen.report import Report

SCHEMA: Final = "composegen.comparison/v1"
ARM_FIGURES = (
    "vllm_version",
    "max_model_len",
    "kv_cache_tokens",
    "kv_cache_gib_min",
    "kv_cache_gib_per_rank",
    "peak_activation_gib",
    "weights_gib",
    "max_concurrency",
)
Scalar = int | float | str | bool | None


class RawArtifact(Report):
    arm: str
    file: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    bytes: int


class ArmFigures(Report):
    arm: str
    profile: str
    profile_hash: str
    emulated: bool
    source: str = Field(description="stack (measured on a running engine) | log (read from a recorded log)")
    figures: dict[str, Scalar | list[float]] = Field(description="engine-reported startup figures")


class Criterion(Report):
    arm: str
    name: str
    measured: Scalar
    threshold: Scalar
    passed: bool


class Difference(Report):
    path: str
    before: Any
    after: Any


class Differences(Report):
    functional: list[Difference]
    identity: list[str] = Field(description="paths that changed only to keep each arm's evidence apart")


class DecisionPart(Report):
    decision: Literal["undecided", "promote", "no-promotion", "fallback"]
    profile: str | None = None
    why: str | None = None
    decided_at: str | None = None


class Model(Report):
    id: str | None
    revision: str | None
    image_digest: str | None = Field(description="sha256:… of the image the arms ran; null for a local build")


class ComparisonReport(Report):
    """runs/campaigns/N/comparison.json (`composegen campaign show N --json` prints it)."""

    schema_: Literal["composegen.comparison/v1"] = Field(default=SCHEMA, alias="schema")
    campaign: str
    control: str
    candidate: str
    emulated: bool = Field(description="at least one arm ran the emulated vLLM: figures exercise composegen only")
    model: Model
    rows: list[CompareRow]
    arms: list[ArmFigures]
    differences: Differences
    unexplained_capacity_change: CapacityChange
    bracket: BracketResult | None
    criteria: list[Criterion]
    decision: DecisionPart
    raw: list[RawArtifact]
    redacted: int = Field(description="strings the sanitizer changed")


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _criteria(key: str, doc: dict, shm: int | None) -> list[dict]:
    startup = doc.get("startup") or {}
    rows = [{"arm": key, "name": "startup", "measured": bool(startup.get("ready")), "threshold": True}]
    rows[-1]["passed"] = rows[-1]["measured"] is True
    for gate in (doc.get("gates") or {}).get("gates") or []:
        rows.append({"arm": key, "name": f"gate:{gate.get('name')}", "measured": bool(gate.get("passed"))})
        rows[-1] |= {"threshold": True, "passed": rows[-1]["measured"]}
    for row in (doc.get("ladder") or {}).get("targets") or []:
        rows.append(
            {
                "arm": key,
                "name": f"ladder:{row.get('target')}",
                "measured": row.get("prompt_tokens"),
                "threshold": row.get("target"),
                "passed": bool(row.get("ok")),
            }
        )
    if shm is not None:
        rows.append({"arm": key, "name": "shm_reclaimable", "measured": shm, "threshold": 0, "passed": shm == 0})
    return rows


def build(state: CampaignState, directory: Path, docs: dict[str, dict], compared: dict, decision: dict | None) -> dict:
    """DOCS: arm key -> its bundle's evidence (load_run); COMPARED: compare_runs(control, candidate)."""
    raw, arms, criteria = [], [], []
    for arm in state.arms:
        doc = docs.get(arm.key)
        if doc is None:
            continue
        bundle = Path(doc["path"])
        whole = bundle / "evidence.json"
        raw.append(
            {"arm": arm.key, "file": "evidence.json", "sha256": file_sha256(whole), "bytes": whole.stat().st_size}
        )
        raw += [{"arm": arm.key, **{k: e[k] for k in ("file", "sha256", "bytes")}} for e in doc["raw"]]
        startup = doc.get("startup") or {}
        arms.append(
            {
                "arm": arm.key,
                "profile": doc["profile"]["name"],
                "profile_hash": doc["profile"].get("hash") or "",
                "emulated": bool(doc.get("emulated")),
                "source": doc.get("source", "stack"),
                "figures": {k: startup.get(k) for k in ARM_FIGURES},
            }
        )
        criteria += _criteria(arm.key, doc, arm.shm_reclaimable)
    if state.bracket is not None:
        criteria.append(
            {
                "arm": "bracket",
                "name": "bracket",
                "measured": state.bracket["passed"],
                "threshold": True,
                "passed": state.bracket["passed"],
            }
        )
    control = docs["control"]
    effective = (control.get("startup") or {}).get("effective_args") or {}
    config = compared["config"]
    doc = {
        "schema": SCHEMA,
        "campaign": state.name,
        "control": state.control,
        "candidate": state.candidate,
        "emulated": any(a["emulated"] for a in arms),
        "model": {
            "id": effective.get("model"),
            "revision": control.get("model_revision"),
            "image_digest": control.get("image_digest"),
        },
        "rows": compared["rows"],
        "arms": arms,
        "differences": {
            "functional": [{k: c[k] for k in ("path", "before", "after")} for c in config["functional"]],
            "identity": [c["path"] for c in config["identity"]],
        },
        "unexplained_capacity_change": compared["unexplained_capacity_change"],
        "bracket": state.bracket,
        "criteria": criteria,
        "decision": _decision(decision),
        "raw": raw,
    }
    private = [d.get("container", {}) and (d.get("container") or {}).get("image_id") for d in docs.values()]
    private += [str(directory.resolve()), str(directory.resolve().parent.parent.parent)]
    scrub = Scrubber(p for p in private if p)
    clean = scrub.json(doc)
    clean["redacted"] = scrub.count
    return ComparisonReport.model_validate(clean).to_json()


def _decision(decision: dict | None) -> dict:
    if decision is None:
        return {"decision": "undecided"}
    return {k: decision.get(k) for k in ("decision", "profile", "why", "decided_at")}
