"""The vllm room's report shapes: the startup report (`composegen schema --report startup`) that
vllm/startup.py parses a log into, and the profile-vs-engine flag mismatches vllm/mismatch.py
finds."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from composegen.report import Report


class Mismatch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    flag: str
    profile: Any
    engine: Any


class StartupError(BaseModel):
    model_config = ConfigDict(extra="forbid")
    line: str
    kind: str
    hint: str
    estimated_max_model_len: int | None = None  # kv_too_small_for_max_len only


class StartupReport(Report):
    kv_cache_tokens: int | None = None
    max_concurrency: float | None = None
    max_model_len: int | None = None
    kv_cache_gib_per_rank: list[float] = Field(default_factory=list)
    kv_cache_gib_min: float | None = None
    weights_gib: float | None = None
    peak_activation_gib: float | None = None
    gpu_total_gib: float | None = None
    gpu_free_gib: float | None = None
    gpu_memory_utilization: float | None = None
    cuda_graph_gib: float | None = None
    engine_init_seconds: float | None = None
    kv_cache_includes_host: bool = False
    vllm_version: str | None = None
    ready: bool = False
    server_address: str | None = None
    errors: list[StartupError] = Field(default_factory=list)
    effective_args: dict[str, Any] | None = None
    lines_parsed: int = 0
    non_torch_gib: float | None = None
    compile_seconds: float | None = None
    runtime_errors: list[StartupError] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    cuda_graph_seconds: float | None = Field(
        default=None, description="capture time the engine states (whole s)"
    )
    cache: Literal["cold", "warm", "partial"] | None = Field(
        default=None,
        description="torch.compile's cache: warm = every artifact loaded, cold = every one compiled, "
        "partial = both; null when nothing was compiled (--enforce-eager) or the log does not say",
    )
    cache_directory: str | None = Field(
        default=None,
        description="the directory vLLM's torch.compile used (`Using cache directory`)",
    )
    cache_reused: list[str] = Field(
        default_factory=list, description="what was loaded from the cache (lowest rank)"
    )
    cache_compiled: list[str] = Field(
        default_factory=list, description="what was compiled and saved (lowest rank)"
    )
    graph_compile_seconds: float | None = Field(
        default=None,
        description="seconds the engine states for each graph it compiled, summed (lowest rank)",
    )
    graph_load_seconds: float | None = Field(
        default=None,
        description="seconds the engine states for each graph it loaded from the cache, summed (lowest rank)",
    )


class StartupCheck(StartupReport):
    """What `composegen startup` prints: the report plus the profile's flags compared with the
    engine's (`mismatches` is null when there is no profile or the engine's args are unknown)."""

    mismatches: list[Mismatch] | None = None
    cache_cold_compile_seconds: float | None = Field(
        default=None,
        description="`up`: torch.compile's seconds at the last cold start with this cache key "
        "(composegen's record, an emulated figure for an emulated start); null: unknown",
    )
