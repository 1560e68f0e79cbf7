"""Reclaim leftover files from a shared-memory directory without ever removing a held one.

`reclaim(path)` previews; `reclaim(path, yes=True)` / `apply_plan(plan)` remove. The shape is
composegen.shm.reports.ShmReclaim (`composegen schema --report shm-reclaim`). docs/shm.md gives
the candidates, the three steps (quarantine by rename, holders again, unlink or put back) and the
race each step closes; symlinks, directories and anything reached through a link are never touched.
"""

from __future__ import annotations

import errno
import math
import os
import secrets
import stat
import time

from composegen.errors import BadInput, CheckFailed
from composegen.shm import hiddenrefs, procscan, scan
from composegen.shm.reports import (
    Candidate,
    Remaining,
    Removed,
    ShmReclaim,
    ShmScan,
    Skipped,
    Unreadable,
)

DEFAULT_MIN_AGE = 60.0
QUARANTINE_PREFIX = ".composegen-q-"  # also a leftover pattern in scan.py: a killed reclaim's files


def check_min_age(min_age: float) -> float:
    if not isinstance(min_age, (int, float)) or not math.isfinite(min_age) or min_age < 0:
        raise BadInput(f"--min-age: {min_age!r} is not a number of seconds >= 0")
    return float(min_age)


def _too_new(st: os.stat_result, min_age: float, now: float) -> str | None:
    # seconds since the file's data (mtime) or inode (ctime: rename, link, chmod) last changed
    ago = now - max(st.st_mtime, st.st_ctime)
    return f"changed {max(ago, 0.0):.0f}s ago (--min-age {min_age:g}s)" if ago < min_age else None


def _plan_from_report(
    report: ShmScan, dfd: int, include_unknown: bool, min_age: float
) -> ShmReclaim:
    removable = {"leftover", "unknown"} if include_unknown else {"leftover"}
    candidates, skipped, now = [], [], time.time()
    for entry in report.entries:
        reason = None
        if entry.class_ == "in-use":
            reason = f"in use by pid {', '.join(str(h.pid) for h in entry.holders)}"
        elif entry.kind != "file":
            reason = f"not a regular file ({entry.kind})"
        elif entry.class_ not in removable:
            reason = "unknown name (use --include-unknown)"
        else:
            try:
                st = os.stat(entry.name, dir_fd=dfd, follow_symlinks=False)
                reason = _too_new(st, min_age, now)
            except FileNotFoundError:
                reason = "already gone"
        if reason:
            skipped.append(Skipped(name=entry.name, reason=reason))
            continue
        candidates.append(
            Candidate.model_validate(  # by its JSON names: "class" is a keyword
                {
                    "name": entry.name,
                    "bytes": entry.allocated_bytes,
                    "class": entry.class_,
                    "dev": entry.dev,
                    "inode": entry.inode,
                }
            )
        )
    return ShmReclaim.model_validate(
        {
            "schema": "composegen.shm-reclaim/v1",
            "path": report.path,
            "applied": False,
            "dir": report.dir,
            "min_age_seconds": min_age,
            "candidates": candidates,
            "candidate_bytes": sum(c.bytes for c in candidates),
            "removed": [],
            "skipped": skipped,
            "bytes_freed": 0,
            "unreadable_pids": report.unreadable_pids,
            "remaining": None,
        }
    )


def _refuse_unreadable(unreadable: list[Unreadable]) -> None:
    pids = ", ".join(f"{u.pid} ({scan.printable(u.comm)})" for u in unreadable)
    raise CheckFailed(
        f"cannot see what {len(unreadable)} process(es) hold, so nothing was removed: pid {pids}",
        hint="run as root (or with CAP_SYS_PTRACE), or pass --ignore-unreadable to accept the risk",
    )


def _refuse_hidden(hidden: list[hiddenrefs.HiddenHolder]) -> None:
    pids = "; ".join(f"pid {h.pid} ({scan.printable(h.comm)}): {h.why}" for h in hidden)
    raise CheckFailed(
        f"{len(hidden)} process(es) may hold files /proc cannot show, so nothing was removed: {pids}",
        hint="run the reclaim again once they have finished (or stop them)",
    )


class _NoReplace:
    """rename(2) that fails with FileExistsError instead of replacing: renameat2(RENAME_NOREPLACE),
    or link + unlink where the kernel or libc lacks it."""

    RENAME_NOREPLACE = 1

    def __init__(self, dfd: int):
        import ctypes

        self.dfd, self._errno = dfd, ctypes.get_errno
        self._renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)

    def __call__(self, src: str, dst: str) -> None:
        if self._renameat2 is not None:
            names = os.fsencode(src), os.fsencode(dst)
            if self._renameat2(self.dfd, names[0], self.dfd, names[1], self.RENAME_NOREPLACE) == 0:
                return
            code = self._errno()
            # no renameat2 here: fall back to link + unlink
            if code not in (errno.ENOSYS, errno.EINVAL):
                raise OSError(code, os.strerror(code), dst)
            self._renameat2 = None
        os.link(src, dst, src_dir_fd=self.dfd, dst_dir_fd=self.dfd, follow_symlinks=False)
        os.unlink(src, dir_fd=self.dfd)


class _Quarantine:
    """Candidates renamed aside, each until unlinked or put back (always put back on errors)."""

    def __init__(self, dfd: int):
        self.dfd, self.rename = dfd, _NoReplace(dfd)
        self.aside: list[tuple[Candidate, str]] = []  # (candidate, name it has now)

    def take(self, cand: Candidate, min_age: float, now: float) -> str | None:
        """Rename one candidate aside; the reason it stays where it is, or None."""
        name = cand.name
        try:
            st = os.stat(name, dir_fd=self.dfd, follow_symlinks=False)
        except FileNotFoundError:
            return "already gone"
        if not stat.S_ISREG(st.st_mode):
            return f"no longer a regular file ({scan.kind_of(st.st_mode)})"
        if (st.st_dev, st.st_ino) != (cand.dev, cand.inode):
            return f"replaced since the scan (inode {cand.inode} -> {st.st_ino})"
        if reason := _too_new(st, min_age, now):
            return reason
        hidden = QUARANTINE_PREFIX + secrets.token_hex(8)
        try:
            self.rename(name, hidden)
        except OSError as exc:
            return f"rename aside failed: {exc.strerror}"
        self.aside.append((cand, hidden))
        moved = os.stat(hidden, dir_fd=self.dfd, follow_symlinks=False)
        # swapped in between stat and rename
        if (moved.st_dev, moved.st_ino) != (cand.dev, cand.inode):
            self.aside.pop()
            return "replaced during the reclaim; " + self.put_back(name, hidden)
        return None

    def put_back(self, name: str, hidden: str) -> str:
        try:
            self.rename(hidden, name)
            return "put back"
        except FileExistsError:
            return f"a new file took its name meanwhile: kept as {hidden}"
        except OSError as exc:
            return f"could not put it back ({exc.strerror}): kept as {hidden}"

    def restore_all(self) -> None:
        while self.aside:
            cand, hidden = self.aside.pop()
            self.put_back(cand.name, hidden)


def _settle(quarantine: _Quarantine, index: procscan.ProcIndex, result: ShmReclaim) -> None:
    """Unlink each quarantined file nothing holds now; put back the held ones."""
    dfd = quarantine.dfd
    while quarantine.aside:
        cand, hidden = quarantine.aside[-1]
        holders = index.holders_of(cand.dev, cand.inode)
        if holders:
            where = quarantine.put_back(cand.name, hidden)
            pids = ", ".join(map(str, sorted(holders)))
            reason = f"now in use by pid {pids}; {where}"
            result.skipped.append(Skipped(name=cand.name, reason=reason))
        else:
            st = os.stat(hidden, dir_fd=dfd, follow_symlinks=False)
            os.unlink(hidden, dir_fd=dfd)  # unlinkat never follows a link
            allocated = st.st_blocks * 512
            result.removed.append(Removed(name=cand.name, bytes=allocated))
            # Blocks come back only with the inode's last name (and no holder, checked above).
            result.bytes_freed += allocated if st.st_nlink == 1 else 0
        quarantine.aside.pop()


def _check_still_safe(plan: ShmReclaim, dfd: int, *, force: bool, ignore_unreadable: bool) -> None:
    """The scanned directory, still on tmpfs, with every process visible (or the risk accepted)."""
    if not force:
        scan.require_tmpfs(dfd, plan.path)
    dir_st = os.fstat(dfd)
    if (dir_st.st_dev, dir_st.st_ino) != (plan.dir.dev, plan.dir.inode):
        replaced = "the directory was replaced since the scan; nothing was removed"
        raise CheckFailed(f"{plan.path}: {replaced}")
    if plan.unreadable_pids and not ignore_unreadable:
        _refuse_unreadable(plan.unreadable_pids)
    if not ignore_unreadable and not procscan.sees_every_process():
        raise CheckFailed(
            "this process runs in a PID namespace of its own (a container?): /proc does not show the"
            " processes outside it, so nothing was removed",
            hint="run the reclaim on the host, or pass --ignore-unreadable to accept the risk",
        )


def _holder_pass(
    quarantine: _Quarantine,
    plan: ShmReclaim,
    result: ShmReclaim,
    proc_root: str,
    ignore_unreadable: bool,
) -> None:
    """Who holds the files set aside now: refuse on what cannot be seen, settle the rest."""
    devs = {c.dev for c, _ in quarantine.aside}
    index = procscan.index_holders(devs, proc_root)  # holders now
    result.unreadable_pids = [Unreadable.model_validate(u) for u in index.unreadable]
    if index.unreadable and not ignore_unreadable:
        quarantine.restore_all()
        _refuse_unreadable(result.unreadable_pids)
    hidden, drained = hiddenrefs.hidden_holders(plan.path, proc_root)
    if hidden:  # no flag accepts this: nothing can tell which files they hold
        quarantine.restore_all()
        _refuse_hidden(hidden)
    # a queue emptied while sampled: an fd received meanwhile is in a table now
    if drained:
        index.merge(procscan.index_holders(devs, proc_root))
    _settle(quarantine, index, result)


def apply_plan(
    plan: ShmReclaim,
    *,
    ignore_unreadable: bool = False,
    container_labels: procscan.LabelResolver | None = None,
    proc_root: str = "/proc",
    force: bool = False,
) -> ShmReclaim:
    """Remove the plan's candidates that are still the same, old enough, unheld regular files
    directly in its directory: quarantine, holder pass, then unlink or put back."""
    for cand in plan.candidates:
        if "/" in cand.name or cand.name in ("", ".", ".."):
            raise BadInput(f"{plan.path}: candidates: {cand.name!r} is not a plain file name")
    min_age = check_min_age(plan.min_age_seconds)
    dfd = scan.open_dir(plan.path, follow=False)
    try:
        _check_still_safe(plan, dfd, force=force, ignore_unreadable=ignore_unreadable)
        result = plan.model_copy(
            update={"applied": True, "removed": [], "skipped": list(plan.skipped), "bytes_freed": 0}
        )
        quarantine, now = _Quarantine(dfd), time.time()
        try:
            for cand in plan.candidates:
                if reason := quarantine.take(cand, min_age, now):
                    result.skipped.append(Skipped(name=cand.name, reason=reason))
            if quarantine.aside:
                _holder_pass(quarantine, plan, result, proc_root, ignore_unreadable)
        finally:
            # an error or Ctrl-C: every file still aside goes back under its name
            quarantine.restore_all()
        after = scan.scan_fd(dfd, plan.path, container_labels, proc_root)
        result.remaining = Remaining(totals=after.totals, filesystem=after.filesystem)
        return result
    finally:
        os.close(dfd)


def reclaim(
    path: str = "/dev/shm",
    *,
    yes: bool = False,
    include_unknown: bool = False,
    ignore_unreadable: bool = False,
    min_age: float = DEFAULT_MIN_AGE,
    force: bool = False,
    container_labels: procscan.LabelResolver | None = None,
    proc_root: str = "/proc",
) -> ShmReclaim:
    """Preview (default) or, with yes, remove unheld leftover files directly in `path` that nothing
    changed for `min_age` seconds. `path` must be a tmpfs unless `force`."""
    min_age = check_min_age(min_age)
    dfd = scan.open_dir(path, follow=False)  # reclaim never works through a symlinked directory
    try:
        if not force:
            scan.require_tmpfs(dfd, path)
        report = scan.scan_fd(dfd, path, container_labels, proc_root)
        plan = _plan_from_report(report, dfd, include_unknown, min_age)
    finally:
        os.close(dfd)
    if not yes:
        return plan
    return apply_plan(
        plan,
        ignore_unreadable=ignore_unreadable,
        container_labels=container_labels,
        proc_root=proc_root,
        force=force,
    )
