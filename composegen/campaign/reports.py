"""The campaign room's JSON shapes (`schema --report comparison|qualification|campaign-state`): what
state.json, comparison.json and qualification.json hold, each checked against its model."""

from __future__ import annotations

import re
from typing import Annotated, Any, Final, Literal

from pydantic import Field

from composegen.bench.reports import BenchDeltas, Comparability
from composegen.evidence.reports.compare import CapacityChange, CompareRow
from composegen.report import Report, described, nullable

STATE_SCHEMA: Final = "composegen.campaign/v1"
COMPARISON_SCHEMA: Final = "composegen.comparison/v1"
QUALIFICATION_SCHEMA: Final = "composegen.qualification/v1"
NAME_RE = re.compile(r"[a-z0-9][a-z0-9_.-]{0,127}")
Scalar = int | float | str | bool | None
Decision = Literal["promote", "no-promotion", "fallback"]

# ---------------------------------------------------------------- the bracket (bracket.py)


class BracketFigure(Report):
    figure: str
    label: str
    first: Any
    replay: Any
    max_rel_diff: float | None = described("largest |replay − first| / |first| over the values")
    passed: bool


class BracketResult(Report):
    passed: bool
    tolerance: float
    exact: bool = Field(description="tolerance 0: both control runs emulated")
    figures: list[BracketFigure]
    replay: Literal["cold", "wake"] = Field(
        default="cold",
        description="how the replayed control came up: cold (started again) or wake (standby: "
        "its engine kept asleep while the candidate ran, then woken; no second cold start)",
    )


# ---------------------------------------------------------------- state.json (state.py)

ArmStatus = Literal["pending", "running", "done", "failed", "skipped"]


ArmKey = Literal["control", "candidate", "bracket", "primary", "fallback"]
ProfileName = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,62}$")]


class ArmState(Report):
    key: ArmKey = described(
        "control | candidate | bracket (A/B); primary | fallback (qualification)"
    )
    profile: ProfileName
    status: ArmStatus = "pending"
    bundle: ArmKey | None = nullable(
        "the arm's evidence bundle: a directory of the campaign, named as the arm"
    )
    attempts: int = 0
    started_at: str | None = None
    finished_at: str | None = None
    time_to_ready_s: float | None = nullable(
        "seconds to ready: a cold start's, or (path wake) the wake's"
    )
    path: Literal["cold", "wake"] | None = nullable(
        "how the arm's engine came up: cold (started, or attached to its start) or "
        "wake (a standby stack an earlier arm put to sleep: no second cold start)"
    )
    emulated: bool | None = None
    shm_reclaimable: int | None = nullable("leftover /dev/shm files after down; null: not checked")
    qualified: bool | None = nullable("qualification arms: every criterion passed")
    error: str | None = None


class CampaignOptions(Report):
    bracket: bool = False
    gate: bool = False
    ladder: list[int] = Field(default_factory=list)
    bench: list[int] = Field(default_factory=list)
    bench_requests: int = 8
    bench_rates: list[float] = Field(
        default_factory=list, description="an open-loop bench arm: request rates (requests/s)"
    )
    bench_input_tokens: int = Field(default=256, ge=1)
    bench_output_tokens: int = Field(default=64, ge=1)
    tools: int = 20
    emulate: bool = False
    tolerance: float | None = nullable("bracket tolerance (relative); null: exact when emulated")
    next_arm: ProfileName | None = None
    next_fallback: ProfileName | None = None


class Residency(Report):
    """Whether a campaign on standby stacks left both engines resident (campaign/resident.py)."""

    resident: bool = described(
        "true: both engines stay up, the one an alias serves awake and the other asleep, "
        "so a promote between them switches by sleep; false: the candidate was taken down (and, "
        "without --bracket, the control: a cold start)"
    )
    reason: str
    awake: str | None = nullable(
        "resident: the profile left awake at the end (the one an alias serves: the control, "
        "or the candidate when the alias already served it); the other is asleep"
    )


class CampaignState(Report):
    schema_: Literal["composegen.campaign/v1"] = Field(default=STATE_SCHEMA, alias="schema")
    name: Annotated[str, Field(pattern=f"^{NAME_RE.pattern}$")]
    kind: Literal["ab", "qualify"]
    control: ProfileName | None = None
    candidate: ProfileName | None = None
    options: CampaignOptions
    arms: list[ArmState]
    created_at: str
    updated_at: str
    bracket: BracketResult | None = None
    residency: Residency | None = None

    def arm(self, key: str) -> ArmState:
        return next(a for a in self.arms if a.key == key)

    @property
    def finished(self) -> bool:
        return all(a.status in ("done", "skipped") for a in self.arms)


# ---------------------------------------------------------------- comparison.json (comparison.py)


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
    source: str = described("stack (measured on a running engine) | log (read from a recorded log)")
    figures: dict[str, Scalar | list[float]] = Field(description="engine-reported startup figures")
    comparability: Comparability | None = nullable(
        "the arm's context (its bundle's record; null: none)"
    )


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
    identity: list[str] = described("paths that changed only to keep each arm's evidence apart")


class DecisionPart(Report):
    decision: Literal["undecided", "promote", "no-promotion", "fallback"]
    profile: str | None = None
    why: str | None = None
    decided_at: str | None = None
    despite_gates: str | None = nullable(
        "a promote despite the candidate's failed gates: the operator's why"
    )


class DecisionRecord(Report):
    """runs/campaigns/N/decision.json (decision.py writes it once; `composegen promote --campaign N`
    reads it)."""

    decision: Decision
    profile: str | None
    campaign: str
    why: str
    decided_at: str
    evidence_sha256: str
    despite_gates: str | None = nullable(
        "a promote despite the candidate's failed gates: the operator's why"
    )
    seal: str = Field(
        default="", description="hmac-sha256 of the other fields under the project's records key"
    )


class Model(Report):
    id: str | None
    revision: str | None
    image_digest: str | None = described(
        "sha256:… of the image the arms ran; null for a local build"
    )


class ComparisonReport(Report):
    """runs/campaigns/N/comparison.json (`composegen campaign show N --json` prints it)."""

    schema_: Literal["composegen.comparison/v1"] = Field(default=COMPARISON_SCHEMA, alias="schema")
    campaign: str
    control: str
    candidate: str
    emulated: bool = described(
        "at least one arm ran the emulated vLLM: figures exercise composegen only"
    )
    model: Model
    rows: list[CompareRow]
    arms: list[ArmFigures]
    differences: Differences
    unexplained_capacity_change: CapacityChange
    comparability: str | None = nullable("null: control and candidate comparable; else why not")
    bracket: BracketResult | None
    bench: BenchDeltas | None = nullable(
        "per-level load-benchmark deltas, a = control, b = candidate (compare's bench)"
    )
    criteria: list[Criterion]
    decision: DecisionPart
    raw: list[RawArtifact]
    redacted: int = Field(description="strings the sanitizer changed")


# ---------------------------------------------------------------- qualification.json
# (qualifyarm.py)


class ArmCriterion(Report):
    name: str
    measured: int | float | str | None
    threshold: int | float | str | None
    passed: bool


class QualifiedArm(Report):
    arm: str
    profile: str
    profile_hash: str
    emulated: bool
    started: bool = Field(description="the engine reported ready")
    qualified: bool
    max_model_len: int | None
    kv_cache_tokens: int | None = described(
        "engine-reported KV pool; null when the engine refused to start"
    )
    kv_pool_estimate: int | None = described(
        "the engine's own estimate when it refused a pool below the context"
    )
    probe: dict[str, int | float | None] | None = described(
        "the long prompt: target, API prompt tokens, TTFT, prefill and decode rates"
    )
    criteria: list[ArmCriterion]


class QualificationReport(Report):
    """runs/campaigns/N/qualification.json."""

    schema_: Literal["composegen.qualification/v1"] = Field(
        default=QUALIFICATION_SCHEMA, alias="schema"
    )
    campaign: str
    emulated: bool
    qualified_arm: str | None = Field(description="the first arm that qualified; null: none did")
    qualified_profile: str | None
    arms: list[QualifiedArm]
    decision: DecisionPart
    raw: list[RawArtifact]
    redacted: int
