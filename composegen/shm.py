"""Inspect a shared-memory directory (/dev/shm) and reclaim leftovers safely.

`scan(path)` -> report (schema "composegen.shm-scan/v1"):
  path, scanned_at (ISO-8601 UTC), scan_seconds, dir {dev, inode},
  filesystem {total_bytes, free_bytes, used_bytes},
  entries [{name, kind: file|dir|symlink|other, class: in-use|leftover|unknown, pattern: id|None,
            allocated_bytes (st_blocks*512), size_bytes, uid, user, age_seconds, dev, inode, nlink,
            holders [{pid, comm, how: ["fd"|"map"], container_id, compose_project, composegen_profile}]}],
  totals {in-use|leftover|unknown|all: {count, allocated_bytes}},
  unreadable_pids [{pid, comm, uid, denied}], vanished (entries gone while scanning)
`reclaim(path)` / `apply_plan(plan)` -> result (schema "composegen.shm-reclaim/v1"):
  path, applied, dir, candidates [{name, bytes, class, dev, inode}], candidate_bytes,
  removed [{name, bytes}], skipped [{name, reason}], bytes_freed, unreadable_pids,
  remaining {totals, filesystem} | None
`container_shm(name_or_id)` -> scan report plus container {id, name, pid, ipc_mode, shm_size_bytes}.
`check_budget(report, need_bytes, leftover_warn_bytes)` -> [warning, ...].
CLI exit codes: 0 ok; 1 leftovers present with --fail-on-leftover, or reclaim refused (CheckFailed);
2 path missing / not a directory / a symlink for reclaim (BadInput); 3 engine problems (EngineError).
"""
from __future__ import annotations

import os
import pwd
import re
import stat
import time
from datetime import datetime, timezone

from composegen import procscan
from composegen.errors import BadInput, CheckFailed, EngineError
from composegen.output import emit_json

CLASSES = ("in-use", "leftover", "unknown")

# Names we know the origin of: a file with such a name and no holder is a leftover of a crash.
LEFTOVER_PATTERNS = (
    {"id": "psm", "glob": "psm_*", "regex": r"psm_.+",
     "creator": "Python multiprocessing.shared_memory (vLLM MessageQueue/ShmRingBuffer, shm_object_storage)",
     "left_when": "the whole process group, resource_tracker included, is SIGKILLed (docker kill, stop timeout)"},
    {"id": "sem-mp", "glob": "sem.mp-*", "regex": r"sem\.mp-.+",
     "creator": "Python multiprocessing locks/semaphores, spawn or forkserver context (glibc sem_open)",
     "left_when": "same as psm_*: the resource_tracker died with the process group"},
    {"id": "sem-loky", "glob": "sem.loky-*", "regex": r"sem\.loky-.+",
     "creator": "joblib/loky semaphores", "left_when": "the loky worker pool was killed"},
    {"id": "nccl", "glob": "nccl-*", "regex": r"nccl-.+",
     "creator": "NCCL SHM transport / proxy (mkstemp; NCCL 2.9: nccl-shm-recv-*)",
     "left_when": "a rank crashed before peers attached; often 0-byte files piling up"},
    {"id": "torch", "glob": "torch_*", "regex": r"torch_\d+_.+",
     "creator": "PyTorch CPU tensor sharing (MapAllocator)",
     "left_when": "rare: normally unlinked at once and visible only as (deleted) mappings"},
    {"id": "vllm-offload", "glob": "vllm_offload_*.mmap[.N]", "regex": r"vllm_offload_.+\.mmap(\.\d+)?",
     "creator": "vLLM CPU KV offload region (0.21+)",
     "left_when": "SIGKILL; a fresh engine id per start makes them pile up across restarts"},
    {"id": "vllm-ec", "glob": "vllm_ec_*.mmap", "regex": r"vllm_ec_.+\.mmap",
     "creator": "vLLM encoder-cache offload region", "left_when": "SIGKILL, like vllm_offload_*"},
    {"id": "pym", "glob": "pym-*", "regex": r"pym-\d+-.+",
     "creator": "Python multiprocessing.heap arenas (mkstemp then unlink)",
     "left_when": "a crash between create and unlink"},
)
_COMPILED = [(p["id"], re.compile(p["regex"], re.DOTALL)) for p in LEFTOVER_PATTERNS]


def match_pattern(name: str) -> str | None:
    return next((pid for pid, rx in _COMPILED if rx.fullmatch(name)), None)


def patterns_table_markdown() -> str:
    rows = ["| Name | Created by | Left behind when |", "|---|---|---|"]
    rows += [f"| `{p['glob']}` | {p['creator']} | {p['left_when']} |" for p in LEFTOVER_PATTERNS]
    return "\n".join(rows)


def _open_dir(path: str, *, follow: bool) -> int:
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


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    return "symlink" if stat.S_ISLNK(mode) else "other"


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
    return {"total_bytes": total, "free_bytes": free, "used_bytes": total - vfs.f_bfree * vfs.f_frsize}


class _HolderDescriber:
    """pid -> holder dict; container id per pid and labels per container are looked up once."""

    def __init__(self, proc_root: str, labels):
        self.proc_root, self.labels = proc_root, labels or procscan.DockerLabelResolver()
        self._cid: dict[int, str | None] = {}
        self._comm: dict[int, str | None] = {}

    def __call__(self, pid: int, hows: set[str]) -> dict:
        if pid not in self._cid:
            self._cid[pid] = procscan.container_id_of(pid, self.proc_root)
            self._comm[pid] = procscan.comm_of(pid, self.proc_root)
        cid = self._cid[pid]
        labels = (self.labels(cid) or {}) if cid else {}
        return {"pid": pid, "comm": self._comm[pid], "how": sorted(hows), "container_id": cid,
                "compose_project": labels.get("com.docker.compose.project"),
                "composegen_profile": labels.get("io.composegen.profile")}


def _scan_fd(dfd: int, path: str, container_labels, proc_root: str) -> dict:
    started, now = time.monotonic(), time.time()
    stats, vanished = [], 0
    for name in os.listdir(dfd):
        try:
            stats.append((name, os.stat(name, dir_fd=dfd, follow_symlinks=False)))
        except FileNotFoundError:
            vanished += 1  # removed between listdir and stat
    index = procscan.index_holders({st.st_dev for _, st in stats}, proc_root)
    describe, users = _HolderDescriber(proc_root, container_labels), {}
    totals = {cls: {"count": 0, "allocated_bytes": 0} for cls in (*CLASSES, "all")}
    entries = []
    for name, st in sorted(stats, key=lambda item: item[0]):
        holders = [describe(pid, hows) for pid, hows in sorted(index.holders_of(st.st_dev, st.st_ino).items())]
        pattern = match_pattern(name)
        cls = "in-use" if holders else ("leftover" if pattern else "unknown")
        allocated = st.st_blocks * 512
        entries.append({"name": name, "kind": _kind(st.st_mode), "class": cls, "pattern": pattern,
                        "allocated_bytes": allocated, "size_bytes": st.st_size, "uid": st.st_uid,
                        "user": _user(st.st_uid, users), "age_seconds": round(max(0.0, now - st.st_mtime), 3),
                        "dev": st.st_dev, "inode": st.st_ino, "nlink": st.st_nlink, "holders": holders})
        for key in (cls, "all"):
            totals[key]["count"] += 1
            totals[key]["allocated_bytes"] += allocated
    dir_st = os.fstat(dfd)
    return {"schema": "composegen.shm-scan/v1", "path": path,
            "scanned_at": datetime.fromtimestamp(now, timezone.utc).isoformat(timespec="seconds"),
            "scan_seconds": round(time.monotonic() - started, 4),
            "dir": {"dev": dir_st.st_dev, "inode": dir_st.st_ino}, "filesystem": _filesystem(dfd),
            "entries": entries, "totals": totals, "unreadable_pids": index.unreadable, "vanished": vanished}


def scan(path: str = "/dev/shm", *, container_labels=None, proc_root: str = "/proc") -> dict:
    """Every entry directly in `path`, classified, with the processes (and containers) holding it.

    container_labels: callable container_id -> labels dict | None (default: docker SDK, lazily).
    """
    dfd = _open_dir(path, follow=True)
    try:
        return _scan_fd(dfd, path, container_labels, proc_root)
    finally:
        os.close(dfd)


def scan_exit_code(report: dict, *, fail_on_leftover: bool = False) -> int:
    return 1 if fail_on_leftover and report["totals"]["leftover"]["count"] else 0


def _plan_from_report(report: dict, include_unknown: bool) -> dict:
    removable = {"leftover", "unknown"} if include_unknown else {"leftover"}
    candidates, skipped = [], []
    for entry in report["entries"]:
        if entry["class"] == "in-use":
            pids = ", ".join(str(h["pid"]) for h in entry["holders"])
            skipped.append({"name": entry["name"], "reason": f"in use by pid {pids}"})
        elif entry["kind"] != "file":
            skipped.append({"name": entry["name"], "reason": f"not a regular file ({entry['kind']})"})
        elif entry["class"] not in removable:
            skipped.append({"name": entry["name"], "reason": "unknown name (use --include-unknown)"})
        else:
            candidates.append({"name": entry["name"], "bytes": entry["allocated_bytes"], "class": entry["class"],
                               "dev": entry["dev"], "inode": entry["inode"]})
    return {"schema": "composegen.shm-reclaim/v1", "path": report["path"], "applied": False, "dir": report["dir"],
            "candidates": candidates, "candidate_bytes": sum(c["bytes"] for c in candidates),
            "removed": [], "skipped": skipped, "bytes_freed": 0,
            "unreadable_pids": report["unreadable_pids"], "remaining": None}


def _refuse_unreadable(unreadable: list[dict]) -> None:
    pids = ", ".join(f"{u['pid']} ({u['comm'] or '?'})" for u in unreadable)
    raise CheckFailed(f"cannot see what {len(unreadable)} process(es) hold, so nothing was removed: pid {pids}",
                      hint="run as root (or with CAP_SYS_PTRACE), or pass --ignore-unreadable to accept the risk")


def _remove_one(dfd: int, cand: dict, index: procscan.ProcIndex) -> tuple[dict | None, str | None, int]:
    """(removed row, skip reason, bytes freed) for one candidate, re-checked right before unlink."""
    name = cand["name"]
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return None, "already gone", 0
    if not stat.S_ISREG(st.st_mode):
        return None, f"no longer a regular file ({_kind(st.st_mode)})", 0
    if (st.st_dev, st.st_ino) != (cand["dev"], cand["inode"]):
        return None, f"replaced since the scan (inode {cand['inode']} -> {st.st_ino})", 0
    holders = index.holders_of(st.st_dev, st.st_ino)
    if holders:
        return None, f"now in use by pid {', '.join(map(str, sorted(holders)))}", 0
    try:
        os.unlink(name, dir_fd=dfd)  # unlinkat never follows a link
    except OSError as exc:
        return None, f"unlink failed: {exc.strerror}", 0
    allocated = st.st_blocks * 512
    # A hard-linked inode frees its blocks only when its last name goes.
    return {"name": name, "bytes": allocated}, None, allocated if st.st_nlink == 1 else 0


def apply_plan(plan: dict, *, ignore_unreadable: bool = False, container_labels=None,
               proc_root: str = "/proc") -> dict:
    """Remove the plan's candidates that are still the same, unheld regular files directly in its dir."""
    for cand in plan["candidates"]:
        if "/" in cand["name"] or cand["name"] in ("", ".", ".."):
            raise BadInput(f"{plan['path']}: candidates: {cand['name']!r} is not a plain file name")
    dfd = _open_dir(plan["path"], follow=False)
    try:
        dir_st = os.fstat(dfd)
        if (dir_st.st_dev, dir_st.st_ino) != (plan["dir"]["dev"], plan["dir"]["inode"]):
            raise CheckFailed(f"{plan['path']}: the directory was replaced since the scan; nothing was removed")
        index = procscan.index_holders({c["dev"] for c in plan["candidates"]}, proc_root)  # holders *now*
        if index.unreadable and not ignore_unreadable:
            _refuse_unreadable(index.unreadable)
        result = dict(plan, applied=True, removed=[], skipped=list(plan["skipped"]), bytes_freed=0,
                      unreadable_pids=index.unreadable)
        for cand in plan["candidates"]:
            removed, reason, freed = _remove_one(dfd, cand, index)
            if removed:
                result["removed"].append(removed)
            else:
                result["skipped"].append({"name": cand["name"], "reason": reason})
            result["bytes_freed"] += freed
        after = _scan_fd(dfd, plan["path"], container_labels, proc_root)
        result["remaining"] = {"totals": after["totals"], "filesystem": after["filesystem"]}
        return result
    finally:
        os.close(dfd)


def reclaim(path: str = "/dev/shm", *, yes: bool = False, include_unknown: bool = False,
            ignore_unreadable: bool = False, container_labels=None, proc_root: str = "/proc") -> dict:
    """Preview (default) or, with yes, remove unheld leftover files directly in `path`."""
    dfd = _open_dir(path, follow=False)  # reclaim never works through a symlinked directory
    try:
        report = _scan_fd(dfd, path, container_labels, proc_root)
    finally:
        os.close(dfd)
    plan = _plan_from_report(report, include_unknown)
    if not yes:
        return plan
    return apply_plan(plan, ignore_unreadable=ignore_unreadable, container_labels=container_labels,
                      proc_root=proc_root)


def container_shm(name_or_id: str, *, container_labels=None, client=None) -> dict:
    """Scan a running container's own /dev/shm from the host through /proc/<its pid>/root."""
    try:
        import docker  # lazy: only this function needs the engine

        client = client or docker.from_env(timeout=10)
        container = client.containers.get(name_or_id)
    except Exception as exc:  # noqa: BLE001 - map SDK errors to our three exit codes
        if type(exc).__name__ == "NotFound":
            raise BadInput(f"{name_or_id}: container: no such container") from None
        raise EngineError(f"docker engine unavailable: {exc}") from None
    state, host_config = container.attrs.get("State", {}), container.attrs.get("HostConfig", {})
    if not state.get("Running") or not state.get("Pid"):
        raise BadInput(f"{name_or_id}: container: not running (status {state.get('Status', '?')})")
    report = scan(f"/proc/{state['Pid']}/root/dev/shm", container_labels=container_labels)
    report["container"] = {"id": container.id, "name": container.name, "pid": state["Pid"],
                           "ipc_mode": host_config.get("IpcMode"), "shm_size_bytes": host_config.get("ShmSize")}
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
        warnings.append(f"{path} is {human_bytes(fs['total_bytes'])} in total but the profile needs "
                        f"{human_bytes(need_bytes)}; raise shm_size or the tmpfs size")
    elif need_bytes > fs["free_bytes"]:
        tip = (f"; reclaiming {leftover['count']} leftovers would free {human_bytes(leftover['allocated_bytes'])}"
               " (composegen shm reclaim)" if leftover["count"] else "")
        warnings.append(f"{path} has {human_bytes(fs['free_bytes'])} free but the profile needs "
                        f"{human_bytes(need_bytes)}{tip}")
    if leftover["count"] and leftover["allocated_bytes"] > leftover_warn_bytes:
        warnings.append(f"{leftover['count']} leftover files use {human_bytes(leftover['allocated_bytes'])} "
                        f"in {path} (over {human_bytes(leftover_warn_bytes)}); see composegen shm reclaim")
    return warnings


def _printable(name: str) -> str:
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


def _unreadable_line(unreadable: list[dict]) -> list[str]:
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
            for h in e["holders"])
        lines.append(f"{e['class']:<9} {human_bytes(e['allocated_bytes']):>10} {_age(e['age_seconds']):>5} "
                     f"{(e['user'] or e['uid']):<8} {e['kind']:<7} {_printable(e['name'])}  {holders}".rstrip())
    fs, totals = report["filesystem"], report["totals"]
    lines.append(", ".join(f"{cls}: {totals[cls]['count']} ({human_bytes(totals[cls]['allocated_bytes'])})"
                           for cls in CLASSES))
    lines.append(f"{report['path']}: {human_bytes(fs['free_bytes'])} free of {human_bytes(fs['total_bytes'])}")
    if "container" in report:
        c = report["container"]
        lines.append(f"container {c['name']} ({c['id'][:12]}), ipc {c['ipc_mode']}")
    return "\n".join(lines + _unreadable_line(report["unreadable_pids"]))


def format_reclaim_text(result: dict) -> str:
    if not result["applied"]:
        lines = [f"would remove {_printable(c['name'])} ({human_bytes(c['bytes'])})" for c in result["candidates"]]
        lines.append(f"preview: {len(result['candidates'])} files, {human_bytes(result['candidate_bytes'])} "
                     f"in {result['path']}; run again with --yes to remove them")
    else:
        lines = [f"removed {_printable(r['name'])} ({human_bytes(r['bytes'])})" for r in result["removed"]]
        candidates = {c["name"] for c in result["candidates"]}  # skips decided at removal time
        lines += [f"kept {_printable(s['name'])}: {s['reason']}" for s in result["skipped"] if s["name"] in candidates]
        lines.append(f"removed {len(result['removed'])} files, freed {human_bytes(result['bytes_freed'])}")
        if result["remaining"]:
            t = result["remaining"]["totals"]
            lines.append("remaining: " + ", ".join(f"{cls} {t[cls]['count']}" for cls in CLASSES))
    return "\n".join(lines + _unreadable_line(result["unreadable_pids"]))


def _main(argv: list[str] | None = None) -> int:
    """Tiny entry for benchmarks and debugging; the real CLI is `composegen shm ...`."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m composegen.shm")
    parser.add_argument("path", nargs="?", default="/dev/shm")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--fail-on-leftover", action="store_true")
    args = parser.parse_args(argv)
    try:
        report = scan(args.path)
    except (BadInput, CheckFailed, EngineError) as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return exc.exit_code
    if args.json:
        emit_json(report)
    else:
        print(format_text(report))
    return scan_exit_code(report, fail_on_leftover=args.fail_on_leftover)


if __name__ == "__main__":
    raise SystemExit(_main())
