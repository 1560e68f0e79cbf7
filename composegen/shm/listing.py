"""One pass over a shared-memory directory: every entry stat-ed, classed by name, and the holders
the /proc pass found — as rows and small typed documents, without pydantic.

Both readers start here: scan.py turns a `Listing` into the ShmScan model (composegen.shm.reports);
fastjson.py writes it as compact JSON straight away (`composegen shm --json`, where importing
pydantic alone would cost more than the whole scan). The documents below are that JSON's pieces, key
for key."""

from __future__ import annotations

import os
import pwd
import stat
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal, NamedTuple, TypedDict

from composegen import privatestate
from composegen.shm import procscan
from composegen.shm.aside import Aside
from composegen.shm.patterns import CLASSES, match_pattern

_KINDS = {stat.S_IFREG: "file", stat.S_IFDIR: "dir", stat.S_IFLNK: "symlink"}


def kind_of(mode: int) -> str:
    return _KINDS.get(stat.S_IFMT(mode), "other")


class DirDoc(TypedDict):
    dev: int
    inode: int


class FilesystemDoc(TypedDict):
    free_bytes: int
    total_bytes: int
    used_bytes: int


class TotalDoc(TypedDict):
    allocated_bytes: int
    count: int


class HolderDoc(TypedDict):
    comm: str | None
    compose_project: str | None
    composegen_profile: str | None
    container_id: str | None
    how: list[Literal["fd", "map"]]
    pid: int


class ScanHead(TypedDict):
    """The scan report without its entries (reports.ShmScan's other keys)."""

    container: None  # a container's facts are scan.py's (container_shm)
    dir: DirDoc
    filesystem: FilesystemDoc
    path: str
    scan_seconds: float
    scanned_at: str
    schema: Literal["composegen.shm-scan/v1"]
    totals: dict[str, TotalDoc]  # "all" and each class
    unreadable_pids: list[procscan.UnreadableDoc]
    vanished: int


Row = tuple[float, int, str, int, int, str, str, int, str | None, int, int, str | None]
"""An entry's values in JSON key order, "holders" aside: age_seconds, allocated_bytes, class, dev, inode,
kind, name, nlink, pattern, size_bytes, uid, user."""

EntryDoc = TypedDict(
    "EntryDoc",
    {
        "age_seconds": float,
        "allocated_bytes": int,
        "class": str,
        "dev": int,
        "holders": list[HolderDoc],
        "inode": int,
        "kind": str,
        "name": str,
        "nlink": int,
        "pattern": str | None,
        "size_bytes": int,
        "uid": int,
        "user": str | None,
    },
)


class Listing(NamedTuple):
    head: ScanHead
    rows: list[Row]  # one per entry, sorted by name, classed by name alone
    held: dict[int, list[HolderDoc]]  # row position -> its holders (those rows are "in-use")
    rendered: Any  # while_waiting(rows) of the whole listing, or None


def entry_doc(row: Row, holders: list[HolderDoc]) -> EntryDoc:
    """An entry as the scan's JSON has it (reports.Entry); a held entry is "in-use"."""
    age, allocated, cls, dev, inode, kind, name, nlink, pattern, size, uid, user = row
    return {
        "age_seconds": age,
        "allocated_bytes": allocated,
        "class": "in-use" if holders else cls,
        "dev": dev,
        "holders": holders,
        "inode": inode,
        "kind": kind,
        "name": name,
        "nlink": nlink,
        "pattern": pattern,
        "size_bytes": size,
        "uid": uid,
        "user": user,
    }


def _user(uid: int, cache: dict[int, str | None]) -> str | None:
    if uid not in cache:
        try:
            cache[uid] = pwd.getpwuid(uid).pw_name
        except KeyError:
            cache[uid] = None
    return cache[uid]


def _filesystem(dfd: int) -> FilesystemDoc:
    vfs = os.statvfs(dfd)
    total, free = vfs.f_blocks * vfs.f_frsize, vfs.f_bavail * vfs.f_frsize
    return {
        "free_bytes": free,
        "total_bytes": total,
        "used_bytes": total - vfs.f_bfree * vfs.f_frsize,
    }


def _no_labels(container_id: str) -> None:
    return None


class _HolderDescriber:
    """pid -> holder document; labels are looked up once per container."""

    def __init__(self, index: procscan.ProcIndex, labels: procscan.LabelResolver | None):
        self.index, self.labels = index, labels or _no_labels

    def __call__(self, pid: int, hows: set[str]) -> HolderDoc:
        comm, cid = self.index.identity(pid)
        labels = (self.labels(cid) or {}) if cid else {}
        return {
            "comm": comm,
            "compose_project": labels.get("com.docker.compose.project"),
            "composegen_profile": labels.get("io.composegen.profile"),
            "container_id": cid,
            "how": sorted(hows),  # type: ignore[arg-type]  # the /proc pass records only "fd" and "map"
            "pid": pid,
        }


def _stat_rows(dfd: int, now: float, names: list[str]) -> tuple[list[Row], int, set[int]]:
    """A row per name (of the directory, sorted), classed by name alone (holders come later); how
    many vanished between listdir and stat; the devices of entries that are mount points."""
    dir_dev, users = os.fstat(dfd).st_dev, dict[int, str | None]()
    rows: list[Row] = []
    vanished, other_devs = 0, set()
    for name in names:
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            vanished += 1  # removed between listdir and stat
            continue
        if st.st_dev != dir_dev:
            other_devs.add(st.st_dev)
        pattern, uid = match_pattern(name), st.st_uid
        rows.append(
            (
                round(max(0.0, now - st.st_mtime), 3),
                st.st_blocks * 512,
                "leftover" if pattern else "unknown",
                st.st_dev,
                st.st_ino,
                kind_of(st.st_mode),
                name,
                st.st_nlink,
                pattern,
                st.st_size,
                uid,
                _user(uid, users),
            )
        )
    return rows, vanished, other_devs


# Below this many entries this process stats them all: sending rows back costs more than it saves.
SPLIT_FROM = 2000
# Reading one process in /proc costs about as much as stat-ing and rendering this many entries
# (bench/shm.sh: ~0.1 ms against ~4.6 us); the child's share of the listing is sized from it.
PROC_COST_IN_ENTRIES = 30


def _parent_share(entries: int, proc_root: str) -> int:
    """How many entries this process stats so that it and the child (the /proc pass, then the rest)
    end about together."""
    if entries < SPLIT_FROM:
        return entries
    processes = len(os.listdir(proc_root))  # a few dozen non-pid names too: close enough
    return min(entries, (entries + processes * PROC_COST_IN_ENTRIES) // 2)


def _aside_part(
    devs: set[int],
    proc_root: str,
    dfd: int,
    names: list[str],
    now: float,
    render: Callable[[list[Row]], Any] | None,
) -> tuple[Any, ...]:
    """The forked child's share: the /proc pass, then the listing's tail stat-ed (and rendered)."""
    index = procscan.index_holders(devs, proc_root, identify=True)
    rows, vanished, other_devs = _stat_rows(dfd, now, names)
    parts = (index.proc_root, index.holders, index.unreadable, index.identities)
    return parts, rows, vanished, other_devs, render(rows) if render else None


def list_fd(
    dfd: int,
    path: str,
    container_labels: procscan.LabelResolver | None,
    proc_root: str,
    while_waiting: Callable[[list[Row]], Any] | None = None,
) -> Listing:
    """Every entry of the open directory `dfd` with its holders; `while_waiting(rows)` runs on each
    share of the rows while the /proc pass is under way (the results concatenated)."""
    started, now = time.monotonic(), time.time()
    dir_st = os.fstat(dfd)
    names = os.listdir(dfd)
    names.sort()
    # A forked child on the other core makes the /proc pass (which inodes are held) and then stats
    # the last part of the listing, while this process stats the first part and, for JSON output,
    # renders them as if nothing held them.
    cut = _parent_share(len(names), proc_root)
    with Aside(
        _aside_part, {dir_st.st_dev}, proc_root, dfd, names[cut:], now, while_waiting
    ) as pending:
        rows, vanished, other_devs = _stat_rows(dfd, now, names[:cut])
        extra = while_waiting(rows) if while_waiting else None
        parts, tail_rows, tail_vanished, tail_devs, tail_extra = pending.result()
    index = procscan.ProcIndex(*parts)
    rows += tail_rows
    vanished += tail_vanished
    other_devs |= tail_devs
    if extra is not None:
        extra += tail_extra
    if other_devs:  # something is mounted inside the directory
        index.merge(procscan.index_holders(other_devs, proc_root))
    held, totals = _held_and_totals(rows, index, container_labels)
    head: ScanHead = {
        "dir": {"dev": dir_st.st_dev, "inode": dir_st.st_ino},
        "filesystem": _filesystem(dfd),
        "path": path,
        "scan_seconds": round(time.monotonic() - started, 4),
        "scanned_at": privatestate.stamp(datetime.fromtimestamp(now, UTC)),
        "schema": "composegen.shm-scan/v1",
        "totals": totals,
        "unreadable_pids": index.unreadable,
        "vanished": vanished,
        "container": None,
    }
    return Listing(head, rows, held, extra)


def _held_and_totals(
    rows: list[Row], index: procscan.ProcIndex, labels: procscan.LabelResolver | None
) -> tuple[dict[int, list[HolderDoc]], dict[str, TotalDoc]]:
    """Each held row's holders (by position), and the count and bytes of each class."""
    describe, holders_of, held = _HolderDescriber(index, labels), index.holders, {}
    totals: dict[str, TotalDoc] = {
        cls: {"allocated_bytes": 0, "count": 0} for cls in ("all", *CLASSES)
    }
    for position, row in enumerate(rows):
        pids = holders_of.get((row[3], row[4])) if holders_of else None
        if pids:
            held[position] = [describe(pid, hows) for pid, hows in sorted(pids.items())]
        cls_total = totals["in-use" if pids else row[2]]
        cls_total["count"] += 1
        cls_total["allocated_bytes"] += row[1]
    all_bytes = sum(totals[cls]["allocated_bytes"] for cls in CLASSES)
    totals["all"] = {"allocated_bytes": all_bytes, "count": len(rows)}
    return held, totals
