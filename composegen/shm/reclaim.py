"""Reclaim leftover files from a shared-memory directory, safely.

`reclaim(path)` previews by default; `reclaim(path, yes=True)` / `apply_plan(plan)` remove
(schema "composegen.shm-reclaim/v1"):
  path, applied, dir, candidates [{name, bytes, class, dev, inode}], candidate_bytes,
  removed [{name, bytes}], skipped [{name, reason}], bytes_freed, unreadable_pids,
  remaining {totals, filesystem} | None
Only leftover (and with include_unknown, unknown) regular files directly in the directory are
removed, each re-checked just before unlink: same inode as scanned, still a regular file, no holder
now. Never symlinks, directories, or anything reached through a link; the directory itself must not
be a symlink and must be the one scanned.
"""

from __future__ import annotations

import os
import stat

from composegen.errors import BadInput, CheckFailed
from composegen.shm import procscan
from composegen.shm import scan as shm


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
            candidates.append(
                {
                    "name": entry["name"],
                    "bytes": entry["allocated_bytes"],
                    "class": entry["class"],
                    "dev": entry["dev"],
                    "inode": entry["inode"],
                }
            )
    return {
        "schema": "composegen.shm-reclaim/v1",
        "path": report["path"],
        "applied": False,
        "dir": report["dir"],
        "candidates": candidates,
        "candidate_bytes": sum(c["bytes"] for c in candidates),
        "removed": [],
        "skipped": skipped,
        "bytes_freed": 0,
        "unreadable_pids": report["unreadable_pids"],
        "remaining": None,
    }


def _refuse_unreadable(unreadable: list[dict]) -> None:
    pids = ", ".join(f"{u['pid']} ({u['comm'] or '?'})" for u in unreadable)
    raise CheckFailed(
        f"cannot see what {len(unreadable)} process(es) hold, so nothing was removed: pid {pids}",
        hint="run as root (or with CAP_SYS_PTRACE), or pass --ignore-unreadable to accept the risk",
    )


def _remove_one(dfd: int, cand: dict, index: procscan.ProcIndex) -> tuple[dict | None, str | None, int]:
    """(removed row, skip reason, bytes freed) for one candidate, re-checked right before unlink."""
    name = cand["name"]
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return None, "already gone", 0
    if not stat.S_ISREG(st.st_mode):
        return None, f"no longer a regular file ({shm.kind_of(st.st_mode)})", 0
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


def apply_plan(plan: dict, *, ignore_unreadable: bool = False, container_labels=None, proc_root: str = "/proc") -> dict:
    """Remove the plan's candidates that are still the same, unheld regular files directly in its dir."""
    for cand in plan["candidates"]:
        if "/" in cand["name"] or cand["name"] in ("", ".", ".."):
            raise BadInput(f"{plan['path']}: candidates: {cand['name']!r} is not a plain file name")
    dfd = shm.open_dir(plan["path"], follow=False)
    try:
        dir_st = os.fstat(dfd)
        if (dir_st.st_dev, dir_st.st_ino) != (plan["dir"]["dev"], plan["dir"]["inode"]):
            raise CheckFailed(f"{plan['path']}: the directory was replaced since the scan; nothing was removed")
        index = procscan.index_holders({c["dev"] for c in plan["candidates"]}, proc_root)  # holders *now*
        if index.unreadable and not ignore_unreadable:
            _refuse_unreadable(index.unreadable)
        result = dict(
            plan,
            applied=True,
            removed=[],
            skipped=list(plan["skipped"]),
            bytes_freed=0,
            unreadable_pids=index.unreadable,
        )
        for cand in plan["candidates"]:
            removed, reason, freed = _remove_one(dfd, cand, index)
            if removed:
                result["removed"].append(removed)
            else:
                result["skipped"].append({"name": cand["name"], "reason": reason})
            result["bytes_freed"] += freed
        after = shm.scan_fd(dfd, plan["path"], container_labels, proc_root)
        result["remaining"] = {"totals": after["totals"], "filesystem": after["filesystem"]}
        return result
    finally:
        os.close(dfd)


def reclaim(
    path: str = "/dev/shm",
    *,
    yes: bool = False,
    include_unknown: bool = False,
    ignore_unreadable: bool = False,
    container_labels=None,
    proc_root: str = "/proc",
) -> dict:
    """Preview (default) or, with yes, remove unheld leftover files directly in `path`."""
    dfd = shm.open_dir(path, follow=False)  # reclaim never works through a symlinked directory
    try:
        report = shm.scan_fd(dfd, path, container_labels, proc_root)
    finally:
        os.close(dfd)
    plan = _plan_from_report(report, include_unknown)
    if not yes:
        return plan
    return apply_plan(plan, ignore_unreadable=ignore_unreadable, container_labels=container_labels, proc_root=proc_root)


def format_reclaim_text(result: dict) -> str:
    if not result["applied"]:
        lines = [
            f"would remove {shm.printable(c['name'])} ({shm.human_bytes(c['bytes'])})" for c in result["candidates"]
        ]
        lines.append(
            f"preview: {len(result['candidates'])} files, {shm.human_bytes(result['candidate_bytes'])} "
            f"in {result['path']}; run again with --yes to remove them"
        )
    else:
        lines = [f"removed {shm.printable(r['name'])} ({shm.human_bytes(r['bytes'])})" for r in result["removed"]]
        candidates = {c["name"] for c in result["candidates"]}  # skips decided at removal time
        lines += [
            f"kept {shm.printable(s['name'])}: {s['reason']}" for s in result["skipped"] if s["name"] in candidates
        ]
        lines.append(f"removed {len(result['removed'])} files, freed {shm.human_bytes(result['bytes_freed'])}")
        if result["remaining"]:
            t = result["remaining"]["totals"]
            lines.append("remaining: " + ", ".join(f"{cls} {t[cls]['count']}" for cls in shm.CLASSES))
    return "\n".join(lines + shm.unreadable_lines(result["unreadable_pids"]))
