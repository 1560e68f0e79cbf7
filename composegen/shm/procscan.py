"""Read /proc once and answer: which processes hold which inode, and which container a pid is in.

Holders are matched by (st_dev, st_ino), never by path text: glibc maps a named semaphore under its
temporary name (`sem.XXXXXX (deleted)`), and a renamed or hard-linked file keeps its inode.

`index_holders(devs, proc_root, identify=False)` returns a `ProcIndex`:
  holders:    {(dev, ino): {pid: {"fd", "map"}}}   only inodes on one of `devs` (all when devs is None)
  unreadable: [{"comm": str|None, "denied": ["fd"|"maps", ...], "pid": int, "uid": int|None}]
  identities: {pid: (comm, container_id)} for every holder pid, when `identify`
`index_holders_aside(...)` runs the same pass in a forked child while the caller stats directory entries.
`container_id_from_cgroup(text)` -> 64-hex id or None; `DockerLabelResolver()(cid)` -> labels or None.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable

from composegen.shm.aside import Aside

# Patterns are compiled on first use (re caches them): the scan runs them in the forked child, so
# the parent's import stays cheap. maps columns: address perms offset dev(major:minor, hex) inode path
_MAPS_DEV_INODE = rb"(?m)^\S+ \S+ \S+ ([0-9a-f]+):([0-9a-f]+) (\d+)"
# A container id is 64 hex chars on its own (docker v1 `/docker/<id>`, systemd `docker-<id>.scope`,
# containerd `cri-containerd-<id>.scope`, podman `libpod-<id>.scope`).
_CONTAINER_ID = r"(?<![0-9a-f])([0-9a-f]{64})(?![0-9a-f])"

LabelResolver = Callable[[str], "dict | None"]


class ProcIndex:
    __slots__ = ("holders", "identities", "proc_root", "unreadable")

    def __init__(self, proc_root: str, holders=None, unreadable=None, identities=None):
        self.proc_root = proc_root
        self.holders: dict[tuple[int, int], dict[int, set[str]]] = holders if holders is not None else {}
        self.unreadable: list[dict] = unreadable if unreadable is not None else []
        self.identities: dict[int, tuple[str | None, str | None]] = identities if identities is not None else {}

    def merge(self, other: ProcIndex) -> None:
        for key, pids in other.holders.items():
            self.holders.setdefault(key, {}).update(pids)
        seen = {u["pid"] for u in self.unreadable}
        self.unreadable += [u for u in other.unreadable if u["pid"] not in seen]
        self.identities.update(other.identities)

    def identity(self, pid: int) -> tuple[str | None, str | None]:
        """(comm, container id) of a holder, from the scan when it recorded them."""
        if pid not in self.identities:
            self.identities[pid] = (comm_of(pid, self.proc_root), container_id_of(pid, self.proc_root))
        return self.identities[pid]

    def holders_of(self, dev: int, ino: int) -> dict[int, set[str]]:
        return self.holders.get((dev, ino), {})


def maps_dev_token(dev: int) -> bytes:
    """How the kernel prints a device in /proc/<pid>/maps (`%02x:%02x`)."""
    return b"%02x:%02x" % (os.major(dev), os.minor(dev))


def read_bytes(path: str) -> bytes:
    """A /proc file whole, through bare os.read (a buffered file object costs more than the read)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):  # /proc hands out a page or so per read
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text(path: str) -> str | None:
    try:
        return read_bytes(path).decode("utf-8", "replace")
    except OSError:
        return None


def comm_of(pid: int, proc_root: str = "/proc") -> str | None:
    text = read_text(f"{proc_root}/{pid}/comm")
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


def _fd_inodes(pid_dir: str, devs: set[int] | None) -> set[tuple[int, int]]:
    try:
        fds = os.listdir(f"{pid_dir}/fd")
    except (FileNotFoundError, ProcessLookupError) as exc:
        raise _Gone from exc
    found = set()
    for fd in fds:
        try:
            st = os.stat(f"{pid_dir}/fd/{fd}")  # follows the magic link to the open file itself
        except (FileNotFoundError, ProcessLookupError):
            continue  # fd closed between listdir and stat
        except PermissionError:
            raise
        except OSError:
            continue  # e.g. anon inodes that refuse stat; they are never shm entries
        if devs is None or st.st_dev in devs:
            found.add((st.st_dev, st.st_ino))
    return found


def _map_inodes(pid_dir: str, dev_tokens: list[bytes] | None) -> set[tuple[int, int]]:
    try:
        data = read_bytes(f"{pid_dir}/maps")
    except (FileNotFoundError, ProcessLookupError) as exc:
        raise _Gone from exc
    # Cheap whole-file test first: most processes map nothing from the directory's filesystem.
    if dev_tokens is not None and not any(token in data for token in dev_tokens):
        return set()
    found = set()
    for major, minor, inode in re.findall(_MAPS_DEV_INODE, data):
        if inode != b"0":
            found.add((os.makedev(int(major, 16), int(minor, 16)), int(inode)))
    return found


def index_holders(devs: Iterable[int] | None = None, proc_root: str = "/proc", identify: bool = False) -> ProcIndex:
    """One pass over every process: fds (stat of each fd link) and maps (dev + inode columns);
    with `identify`, also the comm and container id of each holder."""
    dev_set = set(devs) if devs is not None else None
    dev_tokens = [maps_dev_token(dev) for dev in dev_set] if dev_set is not None else None
    index = ProcIndex(proc_root=proc_root)
    for pid in list_pids(proc_root):
        pid_dir = f"{proc_root}/{pid}"
        denied, keys = [], {}
        for how, reader, arg in (("fd", _fd_inodes, dev_set), ("map", _map_inodes, dev_tokens)):
            try:
                for key in reader(pid_dir, arg):
                    keys.setdefault(key, set()).add(how)
            except PermissionError:
                denied.append("fd" if how == "fd" else "maps")
            except _Gone:
                break
        else:
            if dev_set is not None:
                keys = {key: hows for key, hows in keys.items() if key[0] in dev_set}
            for key, hows in keys.items():
                index.holders.setdefault(key, {})[pid] = hows
            if denied:
                index.unreadable.append(
                    {"comm": comm_of(pid, proc_root), "denied": denied, "pid": pid, "uid": uid_of(pid, proc_root)}
                )
    if identify:
        for pid in sorted({pid for pids in index.holders.values() for pid in pids}):
            index.identity(pid)
    return index


def index_holders_aside(devs: Iterable[int] | None = None, proc_root: str = "/proc", identify: bool = False):
    """`index_holders` in a forked child (aside.py) so that the /proc pass and the caller's own work
    use two cores; `with index_holders_aside(...) as pending: ... pending.result()` -> ProcIndex."""
    return _IndexAside(_index_parts, set(devs) if devs is not None else None, proc_root, identify)


def _index_parts(devs, proc_root: str, identify: bool) -> tuple:
    index = index_holders(devs, proc_root, identify)
    return index.proc_root, index.holders, index.unreadable, index.identities


class _IndexAside(Aside):
    def result(self) -> ProcIndex:
        return ProcIndex(*super().result())


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
    return container_id_from_cgroup(read_text(f"{proc_root}/{pid}/cgroup") or "")


class DockerLabelResolver:
    """container id -> labels through the docker SDK, imported lazily; None when no engine answers.

    After the first failure to reach the engine it stops trying, so a scan without Docker stays fast.
    """

    def __init__(self, timeout: float = 5.0):
        self._timeout = timeout
        self._client = None
        self._engine_down = False
        self._cache: dict[str, dict | None] = {}

    def __call__(self, container_id: str) -> dict | None:
        if container_id not in self._cache:
            self._cache[container_id] = self._lookup(container_id)
        return self._cache[container_id]

    def _lookup(self, container_id: str) -> dict | None:
        if self._engine_down:
            return None
        try:
            import docker  # lazy: render/diff/validate must not need the docker SDK
            import docker.errors

            if self._client is None:
                self._client = docker.from_env(timeout=self._timeout)
            return dict(self._client.containers.get(container_id).labels or {})
        except Exception as exc:
            if type(exc).__name__ != "NotFound":
                self._engine_down = True
            return None
