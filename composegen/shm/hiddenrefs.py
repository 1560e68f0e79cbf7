"""Holders /proc/PID/fd and maps cannot show, so a reclaim must assume they hold everything: files
registered with io_uring and closed, and fds in flight over a unix socket (SCM_RIGHTS). docs/shm.md
says what counts (a ring listing a file of the directory, or not listing completely; a unix socket
with queued data, or any of a process whose namespace cannot be queried).

`hidden_holders(directory, proc_root)` -> ([HiddenHolder(pid, comm, why)], drained): queues are
sampled a few times and only one that stays non-empty counts (live traffic drains); `drained` says
some queue emptied meanwhile, so the caller reads the holders again (the fd may have been received
after its first pass)."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import struct
import threading
import time
from typing import NamedTuple

from composegen.shm.procscan import comm_of, list_pids, read_bytes

NETLINK_SOCK_DIAG, SOCK_DIAG_BY_FAMILY = 4, 20
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
UDIAG_SHOW_RQLEN, UNIX_DIAG_RQLEN = 0x10, 4
CLONE_NEWNET = 0x40000000
SAMPLES, SAMPLE_GAP_S = 3, 0.1


class HiddenHolder(NamedTuple):
    """A process that may hold files /proc cannot show, and why."""

    pid: int
    comm: str | None
    why: str


def unix_queues() -> dict[int, int]:
    """{socket inode: bytes (or pending connections) queued} of every unix socket of this thread's
    network namespace that has any, from sock_diag."""
    req = struct.pack(
        "=BBHIIIII", socket.AF_UNIX, 0, 0, 0xFFFFFFFF, 0, UDIAG_SHOW_RQLEN, 0xFFFFFFFF, 0xFFFFFFFF
    )
    header = struct.pack(
        "=IHHII", 16 + len(req), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, 1, 0
    )
    queued: dict[int, int] = {}
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG) as nl:
        nl.settimeout(5)
        nl.send(header + req)
        while True:
            data = nl.recv(1 << 16)
            offset = 0
            while offset + 16 <= len(data):
                length, kind = struct.unpack_from("=IH", data, offset)
                if kind == NLMSG_DONE:
                    return queued
                if kind == NLMSG_ERROR or length < 16:
                    raise OSError("sock_diag refused the unix socket dump")
                inode = struct.unpack_from("=I", data, offset + 20)[0]
                attr = offset + 16 + 16
                while attr + 4 <= offset + length:
                    alen, atype = struct.unpack_from("=HH", data, attr)
                    if alen < 4:
                        break
                    if atype == UNIX_DIAG_RQLEN and alen >= 12:
                        rqueue = struct.unpack_from("=I", data, attr + 4)[0]
                        if rqueue:
                            queued[inode] = rqueue
                    attr += (alen + 3) & ~3
                offset += (length + 3) & ~3


def _in_namespace(ns_path: str) -> dict[int, int] | None:
    """unix_queues() read from inside another network namespace (a thread of our own enters it with
    setns and ends with it); None when it cannot (no CAP_SYS_ADMIN, the process left)."""
    result: list[dict[int, int] | None] = [None]

    def body() -> None:
        import ctypes

        try:
            fd = os.open(ns_path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return
        try:
            if ctypes.CDLL(None, use_errno=True).setns(fd, CLONE_NEWNET) != 0:
                return
            result[0] = unix_queues()
        except OSError:
            return
        finally:
            os.close(fd)

    thread = threading.Thread(target=body, name="composegen-netns", daemon=True)
    thread.start()
    thread.join(10)
    return result[0]


def _ring_files(pid_dir: str, fd: str) -> list[str] | None:
    """Paths of the files registered with one ring (its fdinfo's UserFiles), or None when the kernel
    did not list them all (it skips the list when the ring is busy) or the fdinfo cannot be read."""
    try:
        text = read_bytes(f"{pid_dir}/fdinfo/{fd}").decode("utf-8", "surrogateescape")
    except OSError:
        return None
    m = re.search(r"^UserFiles:\s*(\d+)$", text, re.M)
    if m is None:
        return None
    files = re.findall(r"^\s*\d+: (.*)$", text[m.end() :].split("UserBufs:")[0], re.M)
    if len(files) != int(m.group(1)):
        return None
    # seq_file_path escapes space, tab, newline and backslash as \ooo
    return [re.sub(r"\\([0-7]{3})", lambda o: chr(int(o.group(1), 8)), f) for f in files]


def _process_facts(pid_dir: str, directory: str) -> tuple[str | None, set[int]]:
    """(why its io_uring instances may hold files in `directory`, or None; its sockets' inodes)."""
    ring, sockets = None, set()
    inside = directory.rstrip("/") + "/"
    try:
        fds = os.listdir(f"{pid_dir}/fd")
    except OSError:
        fds = []
    rings = 0
    for fd in fds:
        try:
            target = os.readlink(f"{pid_dir}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            sockets.add(int(target[8:-1]))
        elif target == "anon_inode:[io_uring]":
            rings += 1
            files = _ring_files(pid_dir, fd)
            if files is None:
                ring = "an io_uring instance whose registered files the kernel does not list"
            elif any(f.startswith(inside) for f in files):
                ring = ring or f"an io_uring instance with a file of {directory} registered"
    if not rings:
        # a ring whose fd was closed (or registered) is still mapped
        with contextlib.suppress(OSError):
            if b"[io_uring]" in read_bytes(f"{pid_dir}/maps"):
                ring = "an io_uring instance without an fd (its registered files cannot be listed)"
    return ring, sockets


def _sample(by_ns: dict[str, tuple[str, set[int]]]) -> dict[str, dict[int, int] | None]:
    own = _netns("/proc/self")
    return {
        ns: unix_queues() if ns == own else _in_namespace(path) for ns, (path, _) in by_ns.items()
    }


def _netns(pid_dir: str) -> str | None:
    try:
        return os.readlink(f"{pid_dir}/ns/net")
    except OSError:
        return None


def _scan_processes(
    directory: str, proc_root: str
) -> tuple[dict[int, list[str]], dict[int, tuple[str, set[int]]], dict[str, tuple[str, set[int]]]]:
    """Each process's io_uring rings on DIRECTORY (found), its unix sockets (sockets: pid -> netns,
    socket inodes), those sockets by namespace (by_ns: netns -> an ns path to enter, inodes)."""
    me = os.getpid()
    found: dict[int, list[str]] = {}
    sockets: dict[int, tuple[str, set[int]]] = {}
    by_ns: dict[str, tuple[str, set[int]]] = {}
    for pid in list_pids(proc_root):
        if pid == me:
            continue
        pid_dir = f"{proc_root}/{pid}"
        ring, socks = _process_facts(pid_dir, directory)
        if ring:
            found.setdefault(pid, []).append(ring)
        if socks:
            ns = _netns(pid_dir) or f"unknown:{pid}"
            sockets[pid] = (ns, socks)
            by_ns.setdefault(ns, (f"{pid_dir}/ns/net", set()))[1].update(socks)
    return found, sockets, by_ns


def _persistent_queues(
    by_ns: dict[str, tuple[str, set[int]]],
) -> tuple[dict[str, set[int] | None], bool]:
    """The sockets whose queues held data in every sample, per namespace (None: cannot be
    queried), and whether a queue drained between samples."""
    drained = False
    persistent: dict[str, set[int] | None] = {}
    for round_ in range(SAMPLES):
        sample = _sample(by_ns)
        for ns, queues in sample.items():
            now = None if queues is None else set(queues) & by_ns[ns][1]
            before = persistent.get(ns, now) if round_ else now
            if before is not None and now is not None and before - now:
                drained = True
            persistent[ns] = None if now is None or before is None else before & now
        if not any(persistent.values()) and all(v is not None for v in persistent.values()):
            break
        time.sleep(SAMPLE_GAP_S)
    return persistent, drained


def hidden_holders(directory: str, proc_root: str = "/proc") -> tuple[list[HiddenHolder], bool]:
    found, sockets, by_ns = _scan_processes(directory, proc_root)
    persistent, drained = _persistent_queues(by_ns)
    for pid, (ns, socks) in sockets.items():
        queued = persistent.get(ns)
        if queued is None:
            why = "unix sockets in a network namespace composegen cannot query"
            found.setdefault(pid, []).append(why)
        elif socks & queued:
            why = "a unix socket with queued data (fds may be in flight)"
            found.setdefault(pid, []).append(why)
    holders = [
        HiddenHolder(p, comm_of(p, proc_root), "; ".join(w)) for p, w in sorted(found.items())
    ]
    return holders, drained
