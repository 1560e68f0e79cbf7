"""Inspect a shared-memory directory (/dev/shm): every entry, who holds it, which container.

`scan(path)` -> report (schema "composegen.shm-scan/v1"):
  path, scanned_at (ISO-8601 UTC), scan_seconds, dir {dev, inode},
  filesystem {total_bytes, free_bytes, used_bytes},
  entries [{name, kind: file|dir|symlink|other, class: in-use|leftover|unknown, pattern: id|None,
            allocated_bytes (st_blocks*512), size_bytes, uid, user, age_seconds, dev, inode, nlink,
            holders [{pid, comm, how: ["fd"|"map"], container_id, compose_project, composegen_profile}]}],
  totals {in-use|leftover|unknown|all: {count, allocated_bytes}},
  unreadable_pids [{pid, comm, uid, denied}], vanished (entries gone while scanning)
`scan_json(path)` -> (that report without entries, its compact JSON in pieces) — the CLI's fast route.
`container_shm(name_or_id)` -> scan report plus container {id, name, pid, ipc_mode, shm_size_bytes}.
`check_budget(report, need_bytes, leftover_warn_bytes)` -> [warning, ...]. Reclaim: shm_reclaim.py.
CLI exit codes: 0 ok; 1 leftovers present with --fail-on-leftover (CheckFailed);
2 path missing / not a directory (BadInput); 3 engine problems (EngineError).
"""

from __future__ import annotations

import functools
import json
import os
import pwd
import re
import stat
import time
from collections.abc import Iterator
from json.encoder import encode_basestring_ascii

from composegen.errors import BadInput, CheckFailed, EngineError
from composegen.output import emit_json, out, pretty_output, write_pieces
from composegen.shm import procscan

CLASSES = ("in-use", "leftover", "unknown")

# Names we know the origin of: a file with such a name and no holder is a leftover of a crash.
LEFTOVER_PATTERNS = (
    {
        "id": "psm",
        "glob": "psm_*",
        "regex": r"psm_.+",
        "creator": "Python multiprocessing.shared_memory (vLLM MessageQueue/ShmRingBuffer, shm_object_storage)",
        "left_when": "the whole process group, resource_tracker included, is SIGKILLed (docker kill, stop timeout)",
    },
    {
        "id": "sem-mp",
        "glob": "sem.mp-*",
        "regex": r"sem\.mp-.+",
        "creator": "Python multiprocessing locks/semaphores, spawn or forkserver context (glibc sem_open)",
        "left_when": "same as psm_*: the resource_tracker died with the process group",
    },
    {
        "id": "sem-loky",
        "glob": "sem.loky-*",
        "regex": r"sem\.loky-.+",
        "creator": "joblib/loky semaphores",
        "left_when": "the loky worker pool was killed",
    },
    {
        "id": "nccl",
        "glob": "nccl-*",
        "regex": r"nccl-.+",
        "creator": "NCCL SHM transport / proxy (mkstemp; NCCL 2.9: nccl-shm-recv-*)",
        "left_when": "a rank crashed before peers attached; often 0-byte files piling up",
    },
    {
        "id": "torch",
        "glob": "torch_*",
        "regex": r"torch_\d+_.+",
        "creator": "PyTorch CPU tensor sharing (MapAllocator)",
        "left_when": "rare: normally unlinked at once and visible only as (deleted) mappings",
    },
    {
        "id": "vllm-offload",
        "glob": "vllm_offload_*.mmap[.N]",
        "regex": r"vllm_offload_.+\.mmap(?:\.\d+)?",
        "creator": "vLLM CPU KV offload region (0.21+)",
        "left_when": "SIGKILL; a fresh engine id per start makes them pile up across restarts",
    },
    {
        "id": "vllm-ec",
        "glob": "vllm_ec_*.mmap",
        "regex": r"vllm_ec_.+\.mmap",
        "creator": "vLLM encoder-cache offload region",
        "left_when": "SIGKILL, like vllm_offload_*",
    },
    {
        "id": "pym",
        "glob": "pym-*",
        "regex": r"pym-\d+-.+",
        "creator": "Python multiprocessing.heap arenas (mkstemp then unlink)",
        "left_when": "a crash between create and unlink",
    },
)
# (id, literal prefix of the glob, regex). Most names fail the prefix test and never meet a regex;
# each regex is compiled the first time a name with its prefix turns up.
_MATCHERS = [(p["id"], p["glob"].split("*", 1)[0], p["regex"]) for p in LEFTOVER_PATTERNS]
_PREFIXES = tuple(prefix for _, prefix, _ in _MATCHERS)
_COMPILED: dict[str, re.Pattern] = {}


def match_pattern(name: str) -> str | None:
    if not name.startswith(_PREFIXES):
        return None
    for pattern_id, prefix, regex in _MATCHERS:
        if name.startswith(prefix):
            compiled = _COMPILED.get(regex) or _COMPILED.setdefault(regex, re.compile(regex, re.DOTALL))
            if compiled.fullmatch(name):
                return pattern_id
    return None


def patterns_table_markdown() -> str:
    rows = ["| Name | Created by | Left behind when |", "|---|---|---|"]
    rows += [f"| `{p['glob']}` | {p['creator']} | {p['left_when']} |" for p in LEFTOVER_PATTERNS]
    return "\n".join(rows)


def open_dir(path: str, *, follow: bool) -> int:
    if not path:
        raise BadInput("path: empty; name a directory")
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        return os.open(path, flags)
    except FileNotFoundError:
        raise BadInput(f"{path}: path: does not exist") from None
    except NotADirectoryError:
        if not follow and os.path.islink(path):  # O_NOFOLLOW|O_DIRECTORY on a link fails with ENOTDIR
            raise BadInput(f"{path}: path: is a symbolic link; pass the directory it points to") from None
        raise BadInput(f"{path}: path: not a directory") from None
    except PermissionError:
        raise BadInput(f"{path}: path: permission denied") from None
    except OSError as exc:
        raise BadInput(f"{path}: path: {exc.strerror}") from None


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


class _HolderDescriber:
    """pid -> holder dict; labels are looked up once per container."""

    def __init__(self, index: procscan.ProcIndex, labels):
        self.index, self.labels = index, labels or procscan.DockerLabelResolver()

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


def _stat_rows(dfd: int, now: float) -> tuple[list[tuple], int, set[int]]:
    """A row per entry of the directory, sorted by name, classed by name alone (holders come later);
    how many vanished between listdir and stat; the devices of entries that are mount points."""
    dir_dev, users = os.fstat(dfd).st_dev, {}
    rows, vanished, other_devs = [], 0, set()
    names = os.listdir(dfd)
    names.sort()
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
    entry = dict(zip(ENTRY_FIELDS, row))
    entry["holders"] = holders
    if holders:
        entry["class"] = "in-use"
    return entry


def _scan_fd(dfd: int, path: str, container_labels, proc_root: str, while_waiting=None):
    """(report without entries, rows, {row position: holders}, while_waiting(rows) or None)."""
    started, now = time.monotonic(), time.time()
    dir_st = os.fstat(dfd)
    # The /proc pass (which inodes are held) runs in a child on the other core while this process
    # stats the entries and, for JSON output, renders them as if nothing held them.
    with procscan.index_holders_aside({dir_st.st_dev}, proc_root, identify=True) as pending:
        rows, vanished, other_devs = _stat_rows(dfd, now)
        extra = while_waiting(rows) if while_waiting else None
        index = pending.result()
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
    }
    return report, rows, held, extra


def scan_fd(dfd: int, path: str, container_labels, proc_root: str) -> dict:
    report, rows, held, _ = _scan_fd(dfd, path, container_labels, proc_root)
    report["entries"] = [_entry(row, held.get(position, [])) for position, row in enumerate(rows)]
    return report


def scan(path: str = "/dev/shm", *, container_labels=None, proc_root: str = "/proc") -> dict:
    """Every entry directly in `path`, classified, with the processes (and containers) holding it.

    container_labels: callable container_id -> labels dict | None (default: docker SDK, lazily).
    """
    dfd = open_dir(path, follow=True)
    try:
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
_PATTERN_JSON = {None: "null", **{p["id"]: f'"{p["id"]}"' for p in LEFTOVER_PATTERNS}}


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


def scan_json(path: str = "/dev/shm", *, container_labels=None, proc_root: str = "/proc") -> tuple[dict, Iterator[str]]:
    """`scan(path)` as compact sorted JSON without a dict per entry: (the report without its entries,
    its whole JSON in pieces). Entries are rendered while the /proc pass runs; those found held are
    rendered again."""
    dfd = open_dir(path, follow=True)
    try:
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


def print_path_scan(path: str = "/dev/shm", *, as_json: bool = False, fail_on_leftover: bool = False) -> None:
    """`composegen shm [--path DIR] [--json]`: compact JSON goes straight from the scan to stdout."""
    if as_json and not pretty_output():
        report, pieces = scan_json(path)
        write_pieces(pieces)
        _check_leftovers(report, fail_on_leftover)
    else:
        print_scan(scan(path), as_json=as_json, fail_on_leftover=fail_on_leftover)


def print_scan(report: dict, *, as_json: bool = False, fail_on_leftover: bool = False) -> None:
    """Print a scan report; with fail_on_leftover, leftovers are a failed check (exit 1)."""
    emit_json(report) if as_json else out(format_text(report))
    _check_leftovers(report, fail_on_leftover)


def _check_leftovers(report: dict, fail_on_leftover: bool) -> None:
    leftovers = report["totals"]["leftover"]["count"]
    if fail_on_leftover and leftovers:
        raise CheckFailed(f"{leftovers} leftover file(s) in {report['path']}")


def container_shm(name_or_id: str, *, container_labels=None, client=None) -> dict:
    """Scan a running container's own /dev/shm from the host through /proc/<its pid>/root."""
    try:
        import docker  # lazy: only this function needs the engine

        client = client or docker.from_env(timeout=10)
        container = client.containers.get(name_or_id)
    except Exception as exc:
        if type(exc).__name__ == "NotFound":
            raise BadInput(f"{name_or_id}: container: no such container") from None
        raise EngineError(f"docker engine unavailable: {exc}") from None
    state, host_config = container.attrs.get("State", {}), container.attrs.get("HostConfig", {})
    if not state.get("Running") or not state.get("Pid"):
        raise BadInput(f"{name_or_id}: container: not running (status {state.get('Status', '?')})")
    report = scan(f"/proc/{state['Pid']}/root/dev/shm", container_labels=container_labels)
    report["container"] = {
        "id": container.id,
        "ipc_mode": host_config.get("IpcMode"),
        "name": container.name,
        "pid": state["Pid"],
        "shm_size_bytes": host_config.get("ShmSize"),
    }
    return report


def human_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def check_budget(scan_report: dict, need_bytes: int, leftover_warn_bytes: int) -> list[str]:
    """Warnings for `up`: too little free shared memory for a profile, or too many leftovers."""
    fs, path = scan_report["filesystem"], scan_report["path"]
    leftover = scan_report["totals"]["leftover"]
    warnings = []
    if need_bytes > fs["total_bytes"]:
        warnings.append(
            f"{path} is {human_bytes(fs['total_bytes'])} in total but the profile needs "
            f"{human_bytes(need_bytes)}; raise shm_size or the tmpfs size"
        )
    elif need_bytes > fs["free_bytes"]:
        tip = (
            f"; reclaiming {leftover['count']} leftovers would free {human_bytes(leftover['allocated_bytes'])}"
            " (composegen shm --reclaim)"
            if leftover["count"]
            else ""
        )
        warnings.append(
            f"{path} has {human_bytes(fs['free_bytes'])} free but the profile needs {human_bytes(need_bytes)}{tip}"
        )
    if leftover["count"] and leftover["allocated_bytes"] > leftover_warn_bytes:
        warnings.append(
            f"{leftover['count']} leftover files use {human_bytes(leftover['allocated_bytes'])} "
            f"in {path} (over {human_bytes(leftover_warn_bytes)}); see composegen shm --reclaim"
        )
    return warnings


def printable(name: str) -> str:
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


def unreadable_lines(unreadable: list[dict]) -> list[str]:
    if not unreadable:
        return []
    pids = ", ".join(f"{u['pid']} ({u['comm'] or '?'}, uid {u['uid']})" for u in unreadable)
    return [f"warning: holders unknown for {len(unreadable)} unreadable process(es): {pids}"]


def format_text(report: dict) -> str:
    lines = [f"{'CLASS':<9} {'ALLOC':>10} {'AGE':>5} {'OWNER':<8} {'KIND':<7} NAME  HOLDERS"]
    for e in report["entries"]:
        holders = "; ".join(
            f"{h['pid']}/{h['comm']} {'+'.join(h['how'])}"
            + (f" [{h['compose_project'] or h['container_id'][:12]}]" if h["container_id"] else "")
            for h in e["holders"]
        )
        lines.append(
            f"{e['class']:<9} {human_bytes(e['allocated_bytes']):>10} {_age(e['age_seconds']):>5} "
            f"{(e['user'] or e['uid']):<8} {e['kind']:<7} {printable(e['name'])}  {holders}".rstrip()
        )
    fs, totals = report["filesystem"], report["totals"]
    lines.append(
        ", ".join(f"{cls}: {totals[cls]['count']} ({human_bytes(totals[cls]['allocated_bytes'])})" for cls in CLASSES)
    )
    lines.append(f"{report['path']}: {human_bytes(fs['free_bytes'])} free of {human_bytes(fs['total_bytes'])}")
    if "container" in report:
        c = report["container"]
        lines.append(f"container {c['name']} ({c['id'][:12]}), ipc {c['ipc_mode']}")
    return "\n".join(lines + unreadable_lines(report["unreadable_pids"]))
