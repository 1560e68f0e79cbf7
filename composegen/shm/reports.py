"""The shm reports as pydantic models: `composegen schema --report shm` and `--report shm-reclaim`.

scan.py returns ShmScan, reclaim.py ShmReclaim. The one exception is the compact `shm --json`
(fastjson.py), which writes 10,000 entries without importing pydantic; tests hold its bytes to this
model's output and schema."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from composegen.report import Report

EntryClass = Literal["in-use", "leftover", "unknown"]


class Holder(Report):
    pid: int
    comm: str | None = Field(description="/proc/PID/comm; null when it could not be read")
    how: list[Literal["fd", "map"]] = Field(
        description="an open fd (any thread's fd table) and/or a mapping"
    )
    container_id: str | None = Field(
        description="64-hex id from /proc/PID/cgroup; null outside containers"
    )
    compose_project: str | None
    composegen_profile: str | None


class Entry(Report):
    name: str
    kind: Literal["file", "dir", "symlink", "other"]
    class_: EntryClass = Field(alias="class")
    pattern: str | None = Field(
        description="id of the leftover pattern the name matches (docs/shm.md)"
    )
    allocated_bytes: int = Field(description="st_blocks * 512: what the entry really occupies")
    size_bytes: int
    uid: int
    user: str | None
    age_seconds: float = Field(description="seconds since mtime")
    dev: int
    inode: int
    nlink: int
    holders: list[Holder]


class DirIdentity(Report):
    dev: int
    inode: int


class Filesystem(Report):
    total_bytes: int
    free_bytes: int
    used_bytes: int


class Total(Report):
    count: int
    allocated_bytes: int


class Totals(Report):
    in_use: Total = Field(alias="in-use")
    leftover: Total
    unknown: Total
    all: Total

    def by_class(self) -> dict[str, Total]:
        """Each class's total by its name (patterns.CLASSES)."""
        return {"in-use": self.in_use, "leftover": self.leftover, "unknown": self.unknown}


class Unreadable(Report):
    pid: int
    comm: str | None
    uid: int | None
    denied: list[Literal["fd", "maps"]]


class ContainerFacts(Report):
    id: str
    name: str | None
    pid: int
    ipc_mode: str | None
    shm_size_bytes: int | None


class ShmScan(Report):
    """`composegen shm [--path DIR | --container C] --json`."""

    schema_: Literal["composegen.shm-scan/v1"] = Field(alias="schema")
    path: str
    scanned_at: str = Field(description="ISO-8601, UTC")
    scan_seconds: float
    dir: DirIdentity
    filesystem: Filesystem
    entries: list[Entry]
    totals: Totals
    unreadable_pids: list[Unreadable] = Field(
        description="processes whose fds or maps could not be read"
    )
    vanished: int = Field(description="entries removed between listing and stat")
    container: ContainerFacts | None = Field(description="with --container: whose /dev/shm this is")


class Candidate(Report):
    name: str
    bytes: int
    class_: EntryClass = Field(alias="class")
    dev: int
    inode: int


class Removed(Report):
    name: str
    bytes: int


class Skipped(Report):
    name: str
    reason: str


class Remaining(Report):
    totals: Totals
    filesystem: Filesystem


class ShmReclaim(Report):
    """`composegen shm --reclaim [--yes] --json`: a preview (applied false) or what was removed."""

    schema_: Literal["composegen.shm-reclaim/v1"] = Field(alias="schema")
    path: str
    applied: bool
    dir: DirIdentity
    min_age_seconds: float = Field(
        description="files whose mtime or ctime is newer were left alone"
    )
    candidates: list[Candidate]
    candidate_bytes: int
    removed: list[Removed]
    skipped: list[Skipped]
    bytes_freed: int = Field(
        description="blocks actually freed: last name of an inode nothing holds"
    )
    unreadable_pids: list[Unreadable]
    remaining: Remaining | None = Field(description="totals after removal; null in a preview")
