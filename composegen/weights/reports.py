"""The JSON shape of `composegen weights` (`composegen schema --report weights`): the head's
snapshot, each file, and for a multi-node profile every other node's copy."""

from __future__ import annotations

from pydantic import Field

from composegen.report import Report


class WeightsFile(Report):
    name: str
    bytes: int | None = Field(
        description="size on disk (through the cache's symlink); null when absent"
    )
    present: bool
    expected_bytes: int | None = Field(
        default=None, description="size the Hub lists (null when the Hub was not asked)"
    )
    verified: bool | None = Field(
        default=None, description="hash matches the Hub (--verify); null when not checked"
    )


class NodeWeights(Report):
    """One node of a multi-node profile (the head is the top-level report)."""

    name: str
    engine: str
    cache_dir: str
    snapshot: str
    complete: bool
    missing: list[str]
    total_bytes: int
    error: str | None = None


class WeightsReport(Report):
    profile: str
    model: str
    revision: str
    cache_dir: str = Field(
        description="host directory checked: the hub cache, or model.path's directory"
    )
    container_dir: str = Field(description="where the container sees it")
    kind: str = Field(description="hub (Hugging Face cache) or path (model.path)")
    snapshot: str
    complete: bool
    files: list[WeightsFile]
    missing: list[str]
    problems: list[str] = Field(
        default_factory=list, description="size or hash mismatches, unreadable index"
    )
    total_bytes: int
    partial_bytes: int = Field(
        default=0, description="bytes of interrupted downloads (blobs/*.incomplete) to resume"
    )
    hub_checked: bool = False
    downloaded: list[str] = Field(default_factory=list)
    nodes: list[NodeWeights] = Field(default_factory=list)
    synced: list[str] = Field(
        default_factory=list, description="nodes the snapshot was copied to (--sync)"
    )
