"""The JSON shapes of `up`, `down` and `status` (`composegen schema --report up|down|status`), and
the parts they hold (a node, a phase's time, a loading engine's stage).

Keys that only a multi-node stack fills (`nodes`, a container's `node`/`rank`/`engine`) are null for
a single-node stack."""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import Field, WithJsonSchema

from composegen.report import Report
from composegen.shm.reports import ShmScan
from composegen.stack.placement import NodeRef
from composegen.stack.preflight import Check
from composegen.vllm.startup import StartupCheck


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

    @classmethod
    def of(cls, n: NodeRef) -> Self:
        return cls(name=n.name, rank=n.rank, role=n.role, engine=n.target.label, project=n.project)


class LiveIdentity(Report):
    """What a running container really is: the profile hash it was started from, its image, emulated
    or not (an evidence bundle's `container`)."""

    hash: str | None
    image_id: str
    repo_digests: list[str]
    emulated: bool


class SleepingStatus(Report):
    """A standby stack's engine asleep (vLLM sleep mode: docs/standby.md)."""

    level: int = Field(description="1: weights in host memory; 2: weights discarded")
    since: str | None = Field(
        description="when composegen put it to sleep (UTC); null: not by composegen"
    )
    gpu_gib_held: float | None = Field(
        description="GPU memory the sleeping engine still holds (its own log line)"
    )


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
        default=False,
        description="ready before this command looked: time_to_ready_s is read from the engine's log",
    )
    endpoint: str = ""
    startup: StartupCheck | None = None  # the startup report (`composegen schema --report startup`)
    nodes: list[NodeInfo] | None = None
    asleep: SleepingStatus | None = None  # `up --standby`: ready, gates passed, then put to sleep


class NodeDown(NodeInfo):
    removed: list[str] = Field(default_factory=list)  # containers
    networks: list[str] = Field(default_factory=list)
    error: str | None = None


class ShmProbeEntry(Report):
    name: str
    bytes: int
    # shm's leftover pattern the name matches (holders cannot be checked remotely)
    pattern: str | None


class ShmProbe(Report):
    """A remote host's /dev/shm, read by a labelled throw-away container there (hostprobe.py)."""

    free_bytes: int
    total_bytes: int
    entries: list[ShmProbeEntry]


class NodeShm(NodeInfo):
    local: bool = False  # the node's engine runs on this machine
    scan: ShmScan | None = None  # the first node on this machine
    probe: ShmProbe | None = None  # a remote node
    shared_with: str | None = None  # a further node on this machine: the same /dev/shm as that node
    error: str | None = None


class NodesShm(Report):
    """/dev/shm of every node of a multi-node profile (`shm --profile --json`, `down`'s shm)."""

    profile: str
    nodes: list[NodeShm]


class DownReport(Report):
    name: str
    project: str
    removed: list[str]  # containers
    networks: list[str] = Field(default_factory=list)
    nodes: list[NodeDown] | None = None
    # /dev/shm after the stop: the host's scan (ipc: host), or every node's for a multi-node stack.
    # The published schema keeps the open object it has always shown (`composegen schema --report
    # down`).
    shm: Annotated[
        ShmScan | NodesShm | None,
        WithJsonSchema(
            {"anyOf": [{"additionalProperties": True, "type": "object"}, {"type": "null"}]}
        ),
    ] = None


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


class LoadingStatus(Report):
    """Where a running engine that does not answer yet is in its start (`status` →
    endpoint.loading)."""

    stage: str | None = Field(
        description="the stage's key (see `up --json` phases), null before the first line"
    )
    label: str | None = None
    summary: str = Field(
        description="the stage as shown, with k/N where the engine logs it: `loading weights 3/8`"
    )
    done: int | None = None
    total: int | None = None
    elapsed_s: float = Field(description="seconds since the container started")
    in_start_period: bool = Field(
        description="still inside startup_timeout (the healthcheck's start_period)"
    )
    failed: str | None = Field(
        default=None, description="the engine's failure line, when it logged one"
    )


class EndpointStatus(Report):
    # http://HOST:PORT the running container publishes; null when it does not run
    url: str | None = None
    healthy: bool | None = None
    served_name: str | None = None
    max_model_len: int | None = None
    # composegen's readiness: /health 200 and /v1/models lists the served name
    ready: bool | None = None
    loading: LoadingStatus | None = None  # a running engine that does not answer yet: its stage
    # a standby stack asleep: answers /health, serves nothing
    sleeping: SleepingStatus | None = None


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
    image_policy: str = Field(
        default="pinned", description="the profile's image_policy (local-build: built on the host)"
    )
    unsafe_mounts: list[str] = Field(
        default_factory=list,
        description="the profile's service.unsafe_mounts, each 'SOURCE: REASON'",
    )


class AliasTarget(Report):
    """An alias of the project's edge and the stack behind it, as clients meet it."""

    alias: str
    profile: str | None  # None: the alias points at nothing
    target: str | None = Field(
        default=None,
        description="that stack's health: ready | asleep | starting | down (its clients get 503)",
    )


class StatusReport(Report):
    stacks: list[StackStatus]
    project: str | None = Field(
        default=None, description="this project's root (--all: every project's stacks)"
    )
    aliases: list[AliasTarget] | None = Field(
        default=None, description="the project's edge: each alias and its stack (None: no edge)"
    )


class CacheRecord(Report):
    """.composegen/caches/KEY.json, this project's starts with a cache key; an export's manifest."""

    key: str
    emulated: bool = False  # an emulated start's volume (KEY-emulated.json): never a real one's
    image_id: str | None = None  # the profile image's ID on the engine at the last start
    uses: dict[str, str] = Field(default_factory=dict)  # profile -> its last start (UTC)
    cold: float | None = None  # the last cold start's compile seconds
    gpus: list[str] = Field(default_factory=list)  # `NAME, DRIVER` of the filling start's GPUs
    files: dict[str, str] = Field(default_factory=dict)  # an export's: name -> sha256


class CacheVolume(Report):
    key: str
    volume: str
    emulated: bool = False  # KEY-emulated: an emulated start's, which a real start never loads
    present: bool  # on this engine
    bytes: int | None = None  # the engine's figure; null: unknown
    created: str | None = None
    last_use: str | None = None  # the last start here with this key
    used_by: list[str] = Field(default_factory=list)  # profiles here that started with it
    mounted_by: list[str] = Field(default_factory=list)  # containers
    rendered_by: list[str] = Field(default_factory=list)  # profiles here that render the key now
    ours: bool = False  # compose made it for a stack of this project, which used it
    cold_compile_seconds: float | None = None  # its last cold start's (EMULATED if it was)
    gpus: list[str] = Field(default_factory=list)  # the filling start's (EMULATED: the emulator's)
    problems: list[str] = Field(default_factory=list)  # verify: why it does not match this host
    unchecked: list[str] = Field(default_factory=list)  # verify: what it could not ask
    pruned: bool | None = None  # prune: removed (false: would be, without --yes)


class CacheReport(Report):
    """`composegen cache list|verify|prune|export|import --json` (docs/caches.md)."""

    project: str
    action: Literal["list", "verify", "prune", "export", "import"]
    volumes: list[CacheVolume]
    file: str | None = None  # export, import: the archive
    files: int | None = None  # its regular files
    skipped: list[str] = Field(default_factory=list)  # export: links and special files left out
