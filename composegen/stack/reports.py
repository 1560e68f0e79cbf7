"""The JSON shapes of `up`, `down` and `status` (`composegen schema --report up|down|status`).

Keys that only a multi-node stack fills (`nodes`, a container's `node`/`rank`/`engine`) are null for a
single-node stack.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from composegen.report import Report
from composegen.stack.loadstate import LoadingStatus
from composegen.stack.preflight import Check


class PhaseTime(Report):
    phase: str
    seconds: float
    # A stage of the engine's start (docs/progress.md); null for the readiness phases.
    stage: str | None = None
    elapsed_s: float | None = None  # time spent in the stage
    done: int | None = None
    total: int | None = None
    unit: str | None = None  # what done/total count: shards, graphs, files, nodes, B


class NodeInfo(Report):
    name: str | None
    rank: int
    role: Literal["head", "worker"]
    engine: str
    project: str


class UpReport(Report):
    name: str
    project: str
    emulated: bool
    checks: list[Check]
    warnings: list[str] = Field(default_factory=list)
    phases: list[PhaseTime] = Field(default_factory=list)
    time_to_ready_s: float | None = None
    detection_latency_s: float | None = None
    ready_before: bool = Field(
        default=False, description="ready before this command looked: time_to_ready_s is read from the engine's log"
    )
    endpoint: str = ""
    startup: dict[str, Any] | None = None  # the startup report (`composegen schema --report startup`)
    nodes: list[NodeInfo] | None = None


class NodeDown(NodeInfo):
    removed: list[str] = Field(default_factory=list)  # containers
    networks: list[str] = Field(default_factory=list)
    error: str | None = None


class DownReport(Report):
    name: str
    project: str
    removed: list[str]  # containers
    networks: list[str] = Field(default_factory=list)
    nodes: list[NodeDown] | None = None
    shm: dict[str, Any] | None = None  # /dev/shm after the stop (the shm scan, or every node's for a multi-node stack)


class Drift(Report):
    state: Literal["in-sync", "drifted", "unknown"]
    running: str | None  # the hash label of the running container
    out: str | None  # the hash in out/'s header
    newer: Literal["out", "running", "profile"] | None = None
    profile: str | None = None  # the hash the profile resolves to now


class ContainerStatus(Report):
    name: str | None
    state: str
    health: str | None = None
    restarts: int = 0
    exit_code: int | None = None
    uptime_s: float | None = None
    emulated: bool = False
    node: str | None = None
    rank: int | None = None
    engine: str | None = None


class EndpointStatus(Report):
    url: str | None = None  # http://HOST:PORT the running container publishes; null when it does not run
    healthy: bool | None = None
    served_name: str | None = None
    max_model_len: int | None = None
    ready: bool | None = None  # composegen's readiness: /health 200 and /v1/models lists the served name
    loading: LoadingStatus | None = None  # a running engine that does not answer yet: its stage


class NodeStatus(NodeInfo):
    reachable: bool = True
    error: str | None = None
    drift: Drift | None = None


class StackStatus(Report):
    profile: str
    project: str | None
    containers: list[ContainerStatus]
    endpoint: EndpointStatus
    drift: Drift
    nodes: list[NodeStatus] | None = None
    networks: list[str] = Field(
        default_factory=list
    )  # the stack's compose networks (reported even when its containers are gone)
    unsafe_mounts: list[str] = Field(
        default_factory=list, description="the profile's service.unsafe_mounts, each 'SOURCE: REASON'"
    )


class StatusReport(Report):
    stacks: list[StackStatus]
