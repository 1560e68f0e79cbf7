"""Inspect a shared-memory directory (/dev/shm): every entry, who holds it, which container.

`scan(path)` -> the report whose shape is composegen.shm.models.ShmScan (`composegen schema --report shm`);
`scan_json(path)` -> (that report without entries, its compact JSON in pieces) — the CLI's fast route.
`container_shm(name_or_id, inspect=...)` -> scan report plus the container's facts.
Text and `up`'s warnings: text.py; the leftover names: patterns.py; reclaim: reclaim.py; docs/shm.md.
Container labels come from an injected callable (container id -> labels | None): no engine here.
CLI exit codes: 0 ok; 1 leftovers present with --fail-on-leftover (CheckFailed);
2 path missing / not a directory / not a tmpfs without --force (BadInput); 3 engine problems (EngineError).
"""

from __future__ import annotations

import functools
import json
import os
import pwd
import stat
import time
from collections.abc import Callable, Iterator
from json.encoder import encode_basestring_ascii

from composegen.errors import BadInput, CheckFailed
from composegen.output import emit_json, out, pretty_output, terminal_width, write_pieces
from composegen.shm import procscan
from composegen.shm.aside import Aside
from composegen.shm.directory import TMPFS_MAGIC as TMPFS_MAGIC
from composegen.shm.directory import filesystem_type as filesystem_type
from composegen.shm.directory import open_dir, require_tmpfs
from composegen.shm.patterns import CLASSES as CLASSES
from composegen.shm.patterns import LEFTOVER_PATTERNS, match_pattern
from composegen.shm.patterns import patterns_table_markdown as patterns_table_markdown
from composegen.shm.text import check_budget as check_budget  # re-exported: stack/ and the CLI use scan.*
from composegen.shm.text import format_text
from composegen.shm.text import human_bytes as human_bytes
from composegen.shm.text import printable as printable
from composegen.shm.text import unreadable_lines as unreadable_lines

_KINDS = {stat.S_IFREG: "file", stat.S_IFDIR: "dir", stat.S_IFLNK: "symlink"}


def kind_of(mode: int) -> str:
    return _KINDS.get(stat.S_IFMT(mode), "other")


def _user(uid: int, cache: dict[int, str | None]) -> str | None:
    if uid not in cache:
        try:
            cache[uid] = pwd.getpwuid(uid).pw_name
        except KeyError:
            cache[uid] = None
    return cache[uid]


def _filesystem(dfd: int) -> dict:
    vfs = os.statvfs(dfd)
    total, free = vfs.f_blocks * vfs.f_frsize, vfs.f_bavail * vfs.f_frsize
    return {"free_bytes": free, "total_bytes": total, "used_bytes": total - vfs.f_bfree * vfs.f_frsize}


def _no_labels(container_id: str) -> None:
    return None


class _HolderDescriber:
    """pid -> holder dict; labels are looked up once per container."""

    def __init__(self, index: procscan.ProcIndex, labels: procscan.LabelResolver | None):
        self.index, self.labels = index, labels or _no_labels

    def __call__(self, pid: int, hows: set[str]) -> dict:
        comm, cid = self.index.identity(pid)
        labels = (self.labels(cid) or {}) if cid else {}
        return {
            "comm": comm,
            "compose_project": labels.get("com.docker.compose.project"),
            "composegen_profile": labels.get("io.composegen.profile"),
            "container_id": cid,
            "how": sorted(hows),
            "pid": pid,
        }


# An entry's fields in JSON key order, "holders" aside; a row is a tuple of their values.
ENTRY_FIELDS = (
    "age_seconds",
    "allocated_bytes",
    "class",
    "dev",
    "inode",
    "kind",
    "name",
    "nlink",
    "pattern",
    "size_bytes",
    "uid",
    "user",
)


def _stat_rows(dfd: int, now: float, names: list[str]) -> tuple[list[tuple], int, set[int]]:
    """A row per name (of the directory, sorted), classed by name alone (holders come later); how many
    vanished between listdir and stat; the devices of entries that are mount points."""
    dir_dev, users = os.fstat(dfd).st_dev, dict[int, str | None]()
    rows: list[tuple] = []
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


def _entry(row: tuple, holders: list[dict]) -> dict:
    entry = dict(zip(ENTRY_FIELDS, row, strict=True))
    entry["holders"] = holders
    if holders:
        entry["class"] = "in-use"
    return entry


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


def _aside_part(devs: set[int], proc_root: str, dfd: int, names: list[str], now: float, render) -> tuple:
    """The forked child's share: the /proc pass, then the tail of the listing stat-ed (and rendered)."""
    index = procscan.index_holders(devs, proc_root, identify=True)
    rows, vanished, other_devs = _stat_rows(dfd, now, names)
    parts = (index.proc_root, index.holders, index.unreadable, index.identities)
    return parts, rows, vanished, other_devs, render(rows) if render else None


def _scan_fd(dfd: int, path: str, container_labels, proc_root: str, while_waiting=None):
    """(report without entries, rows, {row position: holders}, while_waiting(rows) or None)."""
    started, now = time.monotonic(), time.time()
    dir_st = os.fstat(dfd)
    names = os.listdir(dfd)
    names.sort()
    # A forked child on the other core makes the /proc pass (which inodes are held) and then stats the
    # last part of the listing, while this process stats the first part and, for JSON output, renders
    # them as if nothing held them.
    cut = _parent_share(len(names), proc_root)
    with Aside(_aside_part, {dir_st.st_dev}, proc_root, dfd, names[cut:], now, while_waiting) as pending:
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
    describe, holders_of, held = _HolderDescriber(index, container_labels), index.holders, {}
    totals = {cls: {"allocated_bytes": 0, "count": 0} for cls in ("all", *CLASSES)}
    for position, row in enumerate(rows):
        pids = holders_of.get((row[3], row[4])) if holders_of else None
        if pids:
            held[position] = [describe(pid, hows) for pid, hows in sorted(pids.items())]
        cls_total = totals["in-use" if pids else row[2]]
        cls_total["count"] += 1
        cls_total["allocated_bytes"] += row[1]
    totals["all"] = {"allocated_bytes": sum(totals[cls]["allocated_bytes"] for cls in CLASSES), "count": len(rows)}
    report = {
        "dir": {"dev": dir_st.st_dev, "inode": dir_st.st_ino},
        "filesystem": _filesystem(dfd),
        "path": path,
        "scan_seconds": round(time.monotonic() - started, 4),
        "scanned_at": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(now)),
        "schema": "composegen.shm-scan/v1",
        "totals": totals,
        "unreadable_pids": index.unreadable,
        "vanished": vanished,
        "container": None,  # set by container_shm
    }
    return report, rows, held, extra


def scan_fd(dfd: int, path: str, container_labels, proc_root: str) -> dict:
    report, rows, held, _ = _scan_fd(dfd, path, container_labels, proc_root)
    report["entries"] = [_entry(row, held.get(position, [])) for position, row in enumerate(rows)]
    return report


def scan(
    path: str = "/dev/shm",
    *,
    container_labels: procscan.LabelResolver | None = None,
    proc_root: str = "/proc",
    tmpfs_only: bool = False,
) -> dict:
    """Every entry directly in `path`, classified, with the processes (and containers) holding it.

    container_labels: callable container_id -> labels dict | None (default: none looked up).
    tmpfs_only: refuse (BadInput) a directory that is not on a tmpfs.
    """
    dfd = open_dir(path, follow=True)
    try:
        if tmpfs_only:
            require_tmpfs(dfd, path)
        return scan_fd(dfd, path, container_labels, proc_root)
    finally:
        os.close(dfd)


# An entry nothing holds, filled positionally from its row: the same bytes as the compact sorted
# json.dumps of its dict (tests compare the two) at a third of the cost.
_UNHELD_ENTRY_JSON = (
    '{"age_seconds":%r,"allocated_bytes":%d,"class":"%s","dev":%d,"holders":[],"inode":%d,'
    '"kind":"%s","name":%s,"nlink":%d,"pattern":%s,"size_bytes":%d,"uid":%d,"user":%s}'
)
_compact = functools.partial(json.dumps, sort_keys=True, separators=(",", ":"))
_PATTERN_JSON: dict[str | None, str] = {None: "null", **{p["id"]: f'"{p["id"]}"' for p in LEFTOVER_PATTERNS}}


def _unheld_entries_json(rows: list[tuple]) -> list[str]:
    users: dict = {}
    texts = []
    for age, allocated, cls, dev, inode, kind, name, nlink, pattern, size, uid, user in rows:
        if user not in users:
            users[user] = _compact(user)
        texts.append(
            _UNHELD_ENTRY_JSON
            % (
                age,
                allocated,
                cls,
                dev,
                inode,
                kind,
                encode_basestring_ascii(name),
                nlink,
                _PATTERN_JSON[pattern],
                size,
                uid,
                users[user],
            )
        )
    return texts


def scan_json(
    path: str = "/dev/shm",
    *,
    container_labels: procscan.LabelResolver | None = None,
    proc_root: str = "/proc",
    tmpfs_only: bool = False,
) -> tuple[dict, Iterator[str]]:
    """`scan(path)` as compact sorted JSON without a dict per entry: (the report without its entries,
    its whole JSON in pieces). Entries are rendered while the /proc pass runs; those found held are
    rendered again."""
    dfd = open_dir(path, follow=True)
    try:
        if tmpfs_only:
            require_tmpfs(dfd, path)
        report, rows, held, texts = _scan_fd(dfd, path, container_labels, proc_root, _unheld_entries_json)
    finally:
        os.close(dfd)
    for position, holders in held.items():
        texts[position] = _compact(_entry(rows[position], holders))
    return report, _json_pieces(report, texts)


def _json_pieces(report: dict, entry_texts: list[str], batch: int = 1000) -> Iterator[str]:
    yield "{"
    for number, key in enumerate(sorted([*report, "entries"])):
        yield f'{"," if number else ""}"{key}":'
        if key != "entries":
            yield _compact(report[key])
            continue
        yield "["
        for start in range(0, len(entry_texts), batch):
            yield ("," if start else "") + ",".join(entry_texts[start : start + batch])
        yield "]"
    yield "}"


def print_path_scan(
    path: str = "/dev/shm",
    *,
    as_json: bool = False,
    fail_on_leftover: bool = False,
    force: bool = False,
    container_labels: procscan.LabelResolver | None = None,
) -> None:
    """`composegen shm [--path DIR] [--json] [--force]`: compact JSON goes straight from the scan to
    stdout (the fast path; tests check it against the ShmScan model's schema)."""
    if as_json and not pretty_output():
        report, pieces = scan_json(path, container_labels=container_labels, tmpfs_only=not force)
        write_pieces(pieces)
        _check_leftovers(report, fail_on_leftover)
    else:
        report = scan(path, container_labels=container_labels, tmpfs_only=not force)
        print_scan(report, as_json=as_json, fail_on_leftover=fail_on_leftover)


def print_scan(report: dict, *, as_json: bool = False, fail_on_leftover: bool = False) -> None:
    """Print a scan report; with fail_on_leftover, leftovers are a failed check (exit 1)."""
    if as_json:
        from composegen.shm.models import ShmScan  # pydantic: not on the fast path

        emit_json(ShmScan.model_validate(report).to_json())
    else:
        out(format_text(report, terminal_width()))  # a terminal's width folds the holders; piped, full rows
    _check_leftovers(report, fail_on_leftover)


def _check_leftovers(report: dict, fail_on_leftover: bool) -> None:
    leftovers = report["totals"]["leftover"]["count"]
    if fail_on_leftover and leftovers:
        raise CheckFailed(f"{leftovers} leftover file(s) in {report['path']}")


def container_shm(
    name_or_id: str,
    *,
    inspect: Callable[[str], dict],
    container_labels: procscan.LabelResolver | None = None,
) -> dict:
    """Scan a running container's own /dev/shm from the host through /proc/<its pid>/root.

    inspect: name or id -> {id, name, pid, running, status, ipc_mode, shm_size_bytes} (the engine's
    composegen.stack.engine.container_facts, injected); it raises BadInput for an unknown container."""
    facts = inspect(name_or_id)
    if not facts.get("running") or not facts.get("pid"):
        raise BadInput(f"{name_or_id}: container: not running (status {facts.get('status') or '?'})")
    report = scan(f"/proc/{facts['pid']}/root/dev/shm", container_labels=container_labels)
    report["container"] = {key: facts.get(key) for key in ("id", "ipc_mode", "name", "pid", "shm_size_bytes")}
    return report
