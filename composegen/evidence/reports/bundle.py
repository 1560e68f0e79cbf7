"""The evidence.json model (composegen schema --report evidence): what evidence/record.py lets
`load_run` accept. The parts composegen reads are typed strictly; the rest of each part (startup
report, gate details, ladder rows) may carry more keys, since those reports have their own models
and grow."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, StrictBool, StrictInt, StrictStr

from composegen.report import Report

INT_LIMIT = 2**63 - 1


Count = Annotated[StrictInt, Field(ge=0, le=INT_LIMIT)]


Number = Annotated[float, Field(allow_inf_nan=False)]  # JSON integers are accepted as numbers


Hex64 = Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{64}$")]


class _Strict(Report):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class _Open(Report):
    """A part with its own (richer) report model elsewhere: the keys read here are typed, others
    pass."""

    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)


class ProfileRef(_Strict):
    name: StrictStr
    hash: StrictStr


class RawFile(_Strict):
    file: Annotated[
        StrictStr, Field(pattern=r"^[^/\\]+$", description="a plain file name in the bundle")
    ]
    sha256: Hex64
    bytes: Count | None = None


class StartupFacts(_Open):
    """The startup report's figures compare and plan read (the whole shape: `schema --report
    startup`)."""

    kv_cache_tokens: Count | None = None
    max_concurrency: Number | None = None
    max_model_len: Annotated[StrictInt, Field(ge=-1, le=INT_LIMIT)] | None = None
    kv_cache_gib_min: Number | None = None
    kv_cache_gib_per_rank: list[Number] = Field(default_factory=list)
    weights_gib: Number | None = None
    peak_activation_gib: Number | None = None
    gpu_total_gib: Number | None = None
    gpu_memory_utilization: Number | None = None
    kv_cache_includes_host: StrictBool = False
    effective_args: dict[str, Any] | None = None


class GateFacts(_Open):
    passed: Count
    total: Count


class LadderRow(_Open):
    prompt_tokens: Count | None = None
    finish_reason: StrictStr | None = None
    ttft_s: Number | None = None
    prefill_tok_s: Number | None = None
    decode_tok_s: Number | None = None


class LadderFacts(_Open):
    targets: list[LadderRow]
    largest_prompt_tokens: Count | None = None


class EvidenceBundle(_Strict):
    """evidence.json of one run (runs/<UTC time>-<profile>/)."""

    schema_: Literal["composegen.evidence/v1"] = Field(
        default="composegen.evidence/v1", alias="schema"
    )
    profile: ProfileRef
    image_digest: StrictStr | None = None
    model_revision: StrictStr | None = None
    compose_sha256: Hex64 | None = None
    startup: StartupFacts
    gates: GateFacts | None = None
    ladder: LadderFacts | None = None
    bench: dict[str, Any] | None = Field(
        default=None, description="load benchmark: `schema --report bench`"
    )
    container: dict[str, Any] | None = None
    emulated: StrictBool = False
    composegen_version: StrictStr | None = None
    created_at: Annotated[StrictStr, Field(pattern=r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")]
    source: Literal["stack", "log"]
    unknown: list[StrictStr]
    raw: list[RawFile]
