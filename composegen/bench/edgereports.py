"""`bench NAME --via-edge`'s shape (the `via_edge` of a BenchResult; `composegen schema --report
bench-via-edge`): per concurrency level, what a client sees through the edge's public TLS listener
and through the operator door, requests alternated in one run, and what the edge adds (figures:
viaedge.py)."""

from __future__ import annotations

from pydantic import Field

from composegen.report import Report


class PathFigures(Report):
    """One path's requests of one level (ms; null when no value exists)."""

    completed: int
    errors: int
    error_messages: list[str] = Field(description="up to 5 distinct error messages")
    median_ttft_ms: float | None
    p99_ttft_ms: float | None
    median_itl_ms: float | None
    p99_itl_ms: float | None
    median_e2el_ms: float | None
    p99_e2el_ms: float | None


class EdgeLevel(Report):
    concurrency: int
    door: PathFigures = Field(description="plain HTTP at the operator door (door -> proxy -> vLLM)")
    edge: PathFigures = Field(
        description="TLS at the public listener with a client key (proxy -> gate -> vLLM)"
    )
    added_ttft_p50_ms: float | None = Field(description="edge minus door, TTFT median")
    added_ttft_p99_ms: float | None
    added_itl_p50_ms: float | None = Field(description="edge minus door, ITL median")
    added_itl_p99_ms: float | None
    added_e2el_p50_ms: float | None
    added_e2el_p99_ms: float | None


class ViaEdgeResult(Report):
    """`composegen schema --report bench-via-edge`."""

    edge: str = Field(description="the edge's name (edge.yaml)")
    url: str = Field(description="the public listener the edge requests went to")
    alias: str = Field(description="the model name the edge requests asked for")
    tls: str = Field(
        description="how the listener's certificate was verified: the edge's internal CA, the "
        "system's roots, or off (tls.mode off)"
    )
    door_url: str = Field(description="the operator door the direct requests went to")
    alternated: str = Field(description="how the two paths' requests were interleaved")
    emulated: bool | None = Field(description="the stack was the composegen emulator")
    levels: list[EdgeLevel]
