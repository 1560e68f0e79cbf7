"""Who holds a local TCP port: the listening socket's inode from /proc/net/tcp{,6}, then the process
whose fd points at it. Used to say more than "port in use" (a container's port is held by
docker-proxy, which the caller names through the engine). Best effort: another user's processes may
be unreadable."""

from __future__ import annotations

import os
from dataclasses import dataclass

from composegen.errors import ComposegenError
from composegen.stack import engine
from composegen.stack.targets import Target

LISTEN = "0A"


@dataclass(frozen=True)
class PortHolder:
    pid: int
    comm: str
    cmdline: str


def _listening_inodes(port: int, proc_root: str) -> set[str]:
    inodes: set[str] = set()
    for table in ("tcp", "tcp6"):
        try:
            with open(f"{proc_root}/net/{table}", encoding="ascii") as fh:
                next(fh, None)  # header
                for line in fh:
                    fields = line.split()
                    listening = len(fields) > 9 and fields[3] == LISTEN
                    if listening and int(fields[1].rsplit(":", 1)[1], 16) == port:
                        inodes.add(fields[9])
        except (OSError, ValueError):
            continue
    return inodes


def _read(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def port_holder(port: int, proc_root: str = "/proc") -> PortHolder | None:
    """The process listening on a TCP port of this network namespace, or None if not found."""
    wanted = {f"socket:[{inode}]" for inode in _listening_inodes(port, proc_root)}
    if not wanted:
        return None
    for entry in os.scandir(proc_root):
        if not entry.name.isdigit():
            continue
        try:
            fds = os.scandir(f"{entry.path}/fd")
        except OSError:
            continue
        with fds:
            for fd in fds:
                try:
                    if os.readlink(fd.path) in wanted:
                        comm, cmdline = _read(f"{entry.path}/comm"), _read(f"{entry.path}/cmdline")
                        return PortHolder(int(entry.name), comm, cmdline[:200])
                except OSError:
                    continue
    return None


def describe(port: int, holder: PortHolder | None) -> str:
    if holder is None:
        return f"port {port} is in use (its holder is not visible from here)"
    return f"port {port} is held by pid {holder.pid} ({holder.comm}: {holder.cmdline})"


def conflict(port: int, target: Target, knob: str) -> str:
    """Why a wanted host port is taken, and the profile field that moves the stack elsewhere."""
    return f"{holder(port, target)}; `{knob}` in the profile sets another port"


def holder(port: int, target: Target) -> str:
    """Who holds a port: the container publishing it (asked of the engine, by name: its holder in
    /proc is only docker-proxy), else the local process holding it."""
    try:
        names = engine.port_publishers(port, target)
    except ComposegenError:
        names = []
    if names:
        return f"container {', '.join(names)} publishes it"
    if target.is_local:
        return describe(port, port_holder(port))
    return f"something on {target.label} listens on it"
