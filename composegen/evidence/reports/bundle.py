"""The evidence.json model (composegen schema --report evidence): what evidence/record.py lets
`load_run` accept. The parts composegen reads are typed strictly; the rest of each part (startup
report, gate details, ladder rows) may carry more keys, since those reports have their own models
and grow."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, StrictBool, StrictInt, StrictStr

from composegen.bench.reports import BenchResult, Comparability
from composegen.report import Report, nullable

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


class StartupErrorFact(_Open):
    """One error line the parser recognised (the whole shape: the startup report's `errors`)."""

    line: StrictStr | None = None
    kind: StrictStr | None = None


class StartupFacts(_Open):
    """The startup report's figures compare, plan, qualify and campaigns read (the whole shape:
    `schema --report startup`)."""

    vllm_version: StrictStr | None = None
    ready: StrictBool = False
    errors: list[StartupErrorFact] = Field(default_factory=list)
    cuda_graph_gib: Number | None = None

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


class GateRowFact(_Open):
    name: StrictStr
    passed: StrictBool


class GateFacts(_Open):
    passed: Count
    total: Count
    gates: list[GateRowFact] = Field(default_factory=list)


class LadderRow(_Open):
    target: Count | None = None
    ok: StrictBool = False
    prompt_tokens: Count | None = None
    finish_reason: StrictStr | None = None
    ttft_s: Number | None = None
    prefill_tok_s: Number | None = None
    decode_tok_s: Number | None = None


class LadderFacts(_Open):
    targets: list[LadderRow]
    largest_prompt_tokens: Count | None = None


class ContainerFact(_Open):
    """The container the run was captured from (its whole shape: stack.reports.LiveIdentity)."""

    image_id: StrictStr | None = None


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
    bench: BenchResult | None = None
    container: ContainerFact | None = None
    emulated: StrictBool = False
    comparability: Comparability | None = nullable(
        "the run's context (`schema --report bench`'s comparability)"
    )
    composegen_version: StrictStr | None = None
    created_at: Annotated[StrictStr, Field(pattern=r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")]
    source: Literal["stack", "log"]
    unknown: list[StrictStr]
    raw: list[RawFile]

    def as_read(self) -> dict[str, Any]:
        """The document as the file holds it (a loaded run's: plus `path`, `evidence --json`)."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)


class LoadedRun(EvidenceBundle):
    """What `load_run` hands back: a bundle's evidence.json as its model, plus the directory it was
    read from (`path`, not part of the file)."""

    path: StrictStr

    @classmethod
    def at(cls, bundle: EvidenceBundle, directory: Path) -> LoadedRun:
        """BUNDLE (already validated) located at DIRECTORY; the keys the file left out stay unset."""
        values = {name: getattr(bundle, name) for name in EvidenceBundle.model_fields}
        return cls.model_construct(
            bundle.model_fields_set | {"path"}, **values, path=str(directory)
        )
