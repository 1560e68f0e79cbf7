"""Read /proc once and answer: which processes hold which inode, and which container a pid is in.

Holders are matched by (st_dev, st_ino), never by path text: glibc maps a named semaphore under its
temporary name (`sem.XXXXXX (deleted)`), and a renamed or hard-linked file keeps its inode.

Container labels are looked up by the caller's callable (composegen.stack.engine through the CLI):
this module never talks to an engine.

Threads: every thread shares its process's memory (so /proc/PID/maps covers them all), but a thread
may have its own fd table (unshare(CLONE_FILES)); such tables are found with kcmp(2) and their
/proc/PID/task/TID/fd read too. A leader that exited leaves empty fd and maps: its threads are read.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Callable, Iterable
from typing import Any, Literal, TypedDict

# Patterns are compiled on first use (re caches them): the scan runs them in the forked child, so
# the parent's import stays cheap. maps columns: address perms offset dev(major:minor, hex) inode
# path
_MAPS_DEV_INODE = rb"(?m)^\S+ \S+ \S+ ([0-9a-f]+):([0-9a-f]+) (\d+)"
# A container id is 64 hex chars on its own (docker v1 `/docker/<id>`, systemd `docker-<id>.scope`,
# containerd `cri-containerd-<id>.scope`, podman `libpod-<id>.scope`).
_CONTAINER_ID = r"(?<![0-9a-f])([0-9a-f]{64})(?![0-9a-f])"

LabelResolver = Callable[[str], "dict[str, str] | None"]


class UnreadableDoc(TypedDict):
    """A process whose fds or maps could not be read, as the scan lists it (reports.Unreadable)."""

    comm: str | None
    denied: list[Literal["fd", "maps"]]
    pid: int
    uid: int | None


class ProcIndex:
    """holders {(dev, ino): {pid: {"fd", "map"}}} (inodes on the asked devs, all for None), the
    processes not readable, identities {pid: (comm, container_id)} of holders when asked."""

    __slots__ = ("holders", "identities", "proc_root", "unreadable")

    def __init__(
        self,
        proc_root: str,
        holders: dict[tuple[int, int], dict[int, set[str]]] | None = None,
        unreadable: list[UnreadableDoc] | None = None,
        identities: dict[int, tuple[str | None, str | None]] | None = None,
    ) -> None:
        self.proc_root = proc_root
        self.holders = holders if holders is not None else {}
        self.unreadable = unreadable if unreadable is not None else []
        self.identities = identities if identities is not None else {}

    def merge(self, other: ProcIndex) -> None:
        for key, pids in other.holders.items():
            self.holders.setdefault(key, {}).update(pids)
        seen = {u["pid"] for u in self.unreadable}
        self.unreadable += [u for u in other.unreadable if u["pid"] not in seen]
        self.identities.update(other.identities)

    def identity(self, pid: int) -> tuple[str | None, str | None]:
        """(comm, container id) of a holder, from the scan when it recorded them."""
        if pid not in self.identities:
            root = self.proc_root
            self.identities[pid] = (comm_of(pid, root), container_id_of(pid, root))
        return self.identities[pid]

    def holders_of(self, dev: int, ino: int) -> dict[int, set[str]]:
        return self.holders.get((dev, ino), {})


def maps_dev_token(dev: int) -> bytes:
    """How the kernel prints a device in /proc/<pid>/maps (`%02x:%02x`)."""
    return b"%02x:%02x" % (os.major(dev), os.minor(dev))


def read_bytes(path: str, whole: bool = True) -> bytes:
    """A /proc file by bare os.read (cheaper than a file object): whole, or (small files that only
    name a holder) one read of up to 64 KiB, sparing the read at EOF."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):  # /proc hands out a page or so per read
            chunks.append(chunk)
            if not whole:
                break
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text(path: str, whole: bool = True) -> str | None:
    try:
        return read_bytes(path, whole).decode("utf-8", "replace")
    except OSError:
        return None


def comm_of(pid: int, proc_root: str = "/proc") -> str | None:
    text = read_text(f"{proc_root}/{pid}/comm", whole=False)
    return text.rstrip("\n") if text is not None else None


def uid_of(pid: int, proc_root: str = "/proc") -> int | None:
    for line in (read_text(f"{proc_root}/{pid}/status") or "").splitlines():
        if line.startswith("Uid:"):
            parts = line.split()
            return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
    return None


def list_pids(proc_root: str = "/proc") -> list[int]:
    return sorted(int(name) for name in os.listdir(proc_root) if name.isdigit())


class _Gone(Exception):
    """The process exited while we read it: not an error, just skip it."""


def _fd_inodes(fd_owner: str, devs: set[int] | None) -> set[tuple[int, int]]:
    """(dev, ino) of every open file in `fd_owner`/fd (a process or one of its threads)."""
    try:
        fds = os.listdir(f"{fd_owner}/fd")
    except (FileNotFoundError, ProcessLookupError) as exc:
        raise _Gone from exc
    found = set()
    for fd in fds:
        try:
            st = os.stat(f"{fd_owner}/fd/{fd}")  # follows the magic link to the open file itself
        except (FileNotFoundError, ProcessLookupError):
            continue  # fd closed between listdir and stat
        except PermissionError:
            raise
        except OSError:
            continue  # e.g. anon inodes that refuse stat; they are never shm entries
        if devs is None or st.st_dev in devs:
            found.add((st.st_dev, st.st_ino))
    return found


def _map_inodes(data: bytes, dev_tokens: list[bytes] | None) -> set[tuple[int, int]]:
    # Cheap whole-file test first: most processes map nothing from the directory's filesystem.
    if dev_tokens is not None and not any(token in data for token in dev_tokens):
        return set()
    found = set()
    for major, minor, inode in re.findall(_MAPS_DEV_INODE, data):
        if inode != b"0":
            found.add((os.makedev(int(major, 16), int(minor, 16)), int(inode)))
    return found


def _read_maps(pid_dir: str, threads: list[str]) -> bytes:
    try:
        data = read_bytes(f"{pid_dir}/maps")
    except (FileNotFoundError, ProcessLookupError) as exc:
        raise _Gone from exc
    # the leader exited; its threads still map what they map
    for tid in threads if not data else ():
        try:
            data = read_bytes(f"{pid_dir}/task/{tid}/maps")
        except (FileNotFoundError, ProcessLookupError):
            continue
        if data:
            break
    return data


def _threads(pid: int, pid_dir: str) -> list[str]:
    """The thread ids of a process other than its leader (most processes have none)."""
    try:
        # 2 + the number of threads: a stat beats a listing
        if os.stat(f"{pid_dir}/task").st_nlink == 3:
            return []
        tids = os.listdir(f"{pid_dir}/task")
    except OSError:
        return []
    return [tid for tid in tids if tid != str(pid)] if len(tids) > 1 else []


_KCMP_SYSCALL = {
    "x86_64": 312,
    "aarch64": 272,
    "riscv64": 272,
    "ppc64le": 354,
    "ppc64": 354,
    "s390x": 343,
}


class _FdTables:
    """Which threads have an fd table of their own, through kcmp(KCMP_FILES); when the kernel or a
    seccomp filter refuses kcmp, every thread counts as having one (slower, never blind)."""

    KCMP_FILES = 2

    def __init__(self) -> None:
        self._kcmp: Callable[..., int] | None = None
        self._usable: bool | None = None

    def _setup(self) -> bool:
        import ctypes  # only once a threaded process turns up, in the /proc pass's child

        number = _KCMP_SYSCALL.get(os.uname().machine)
        if number is None:
            return False
        libc = ctypes.CDLL(None, use_errno=True)
        self._kcmp = lambda a, b: libc.syscall(number, a, b, self.KCMP_FILES, 0, 0)
        self._errno = ctypes.get_errno
        return True

    def own(self, pid: int, threads: list[str]) -> list[str]:
        """The threads whose fd table differs from the leader's and from each other's."""
        if self._usable is None:
            self._usable = self._setup()
        if not self._usable or self._kcmp is None:
            return threads
        tables, own = [pid], []
        for tid in threads:
            results = [self._kcmp(table, int(tid)) for table in tables]
            if 0 in results:
                continue  # shares a table already read
            if -1 in results and self._errno() not in (errno.ESRCH,):
                # ENOSYS, or EPERM from a seccomp filter: read every thread from now on
                self._usable = False
                return threads
            if -1 not in results:
                tables.append(int(tid))
                own.append(tid)
        return own


def _holdings(
    pid: int, pid_dir: str, dev_set: set[int] | None, dev_tokens: Any, fd_tables: _FdTables
) -> tuple[dict[tuple[int, int], set[str]], list[Literal["fd", "maps"]]]:
    """({(dev, ino): {"fd", "map"}}, denied) of a process and its threads; _Gone if exited."""
    keys: dict[tuple[int, int], set[str]] = {}
    denied: list[Literal["fd", "maps"]] = []
    threads = _threads(pid, pid_dir)
    try:
        for key in _fd_inodes(pid_dir, dev_set):
            keys.setdefault(key, set()).add("fd")
        for tid in fd_tables.own(pid, threads) if threads else ():
            try:
                for key in _fd_inodes(f"{pid_dir}/task/{tid}", dev_set):
                    keys.setdefault(key, set()).add("fd")
            except _Gone:
                continue  # that thread ended
    except PermissionError:
        denied.append("fd")
    try:
        for key in _map_inodes(_read_maps(pid_dir, threads), dev_tokens):
            keys.setdefault(key, set()).add("map")
    except PermissionError:
        denied.append("maps")
    return keys, denied


def index_holders(
    devs: Iterable[int] | None = None, proc_root: str = "/proc", identify: bool = False
) -> ProcIndex:
    """One pass over every process: fds (stat of each fd link, in every fd table of its threads) and
    maps (dev + inode columns); with `identify`, each holder's comm and container id too."""
    dev_set = set(devs) if devs is not None else None
    dev_tokens = [maps_dev_token(dev) for dev in dev_set] if dev_set is not None else None
    index, fd_tables = ProcIndex(proc_root=proc_root), _FdTables()
    for pid in list_pids(proc_root):
        try:
            keys, denied = _holdings(pid, f"{proc_root}/{pid}", dev_set, dev_tokens, fd_tables)
        except _Gone:
            continue
        for key, hows in keys.items():
            if dev_set is None or key[0] in dev_set:
                index.holders.setdefault(key, {})[pid] = hows
        if denied:
            comm, uid = comm_of(pid, proc_root), uid_of(pid, proc_root)
            index.unreadable.append({"comm": comm, "denied": denied, "pid": pid, "uid": uid})
    if identify:
        for pid in sorted({pid for pids in index.holders.values() for pid in pids}):
            index.identity(pid)
    return index


# PROC_PID_INIT_INO: the same inode on every Linux since 3.8
INITIAL_PID_NAMESPACE = "pid:[4026531836]"


def sees_every_process() -> bool:
    """Whether this process lives in the initial PID namespace. In any other (a container's), /proc
    lists none of the processes outside it, so their holdings cannot be read at all."""
    try:
        return os.readlink("/proc/self/ns/pid") == INITIAL_PID_NAMESPACE
    except OSError:
        return False


def container_id_from_cgroup(text: str) -> str | None:
    """The innermost 64-hex container id named in a /proc/<pid>/cgroup text (v1 or v2), if any."""
    if not re.search(_CONTAINER_ID, text):
        return None  # most processes on a host: one search instead of one per controller line
    for line in text.splitlines():
        path = line.split(":", 2)[-1]
        ids = re.findall(_CONTAINER_ID, path)
        if ids:
            return ids[-1]  # nested engines (docker in docker): the last id is the innermost
    return None


def container_id_of(pid: int, proc_root: str = "/proc") -> str | None:
    return container_id_from_cgroup(read_text(f"{proc_root}/{pid}/cgroup", whole=False) or "")
