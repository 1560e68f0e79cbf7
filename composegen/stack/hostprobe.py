"""Questions about an engine's HOST, answered by a throw-away probe container (engine.run_probe), so
a remote engine is asked exactly like the local one: the rlimit ceiling it grants
(`engine_rlimits`), and which host ports are free plus what /dev/shm holds (`host_probe`)."""

from __future__ import annotations

import json
from typing import NotRequired, TypedDict, cast

from composegen.stack.engine import run_probe
from composegen.stack.targets import Target

_RLIMITS = (
    "import resource as r\n"
    "for n in ('memlock','nofile','stack'):\n"
    "    h=r.getrlimit(getattr(r,'RLIMIT_'+n.upper()))[1]\n"
    "    print(n, -1 if h==r.RLIM_INFINITY else h)\n"
)


def engine_rlimits(image: str, owner: str, target: Target | None = None) -> dict[str, int]:
    """Hard rlimits a container gets from this engine (-1 = unlimited): the ceiling it can grant."""
    raw = run_probe(image, ["-c", _RLIMITS], owner, target, network_mode="none")
    return {k: int(v) for k, v in (line.split() for line in raw.splitlines() if line.strip())}


_PROBE = """
import json, os, socket, sys
want = json.loads(sys.argv[1])
ports = []
for host, port in want["ports"]:
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind((host, port)); free = True
    except OSError:
        free = False
    s.close()
    ports.append({"host": host, "port": port, "free": free})
st = os.statvfs("/dev/shm")
entries = []
for e in os.scandir("/dev/shm"):
    try:
        entries.append({"name": e.name, "bytes": e.stat(follow_symlinks=False).st_blocks * 512})
    except OSError:
        pass
shm = {"free_bytes": st.f_bavail * st.f_frsize, "total_bytes": st.f_blocks * st.f_frsize, "entries": entries}
print(json.dumps({"ports": ports, "shm": shm}))
"""


class PortState(TypedDict):
    host: str
    port: int
    free: bool


class ShmEntry(TypedDict):
    name: str
    bytes: int
    # not from the probe: which leftover pattern it matches (nodeshm.py)
    pattern: NotRequired[str | None]


class ShmListing(TypedDict):
    free_bytes: int
    total_bytes: int
    entries: list[ShmEntry]


class HostProbe(TypedDict):
    """What the probe script prints: the ports asked about, and the host's /dev/shm."""

    ports: list[PortState]
    shm: ShmListing


def host_probe(
    image: str, owner: str, target: Target | None, ports: list[tuple[str, int]]
) -> HostProbe:
    """Look at an engine's HOST from a throw-away container on the host network and host IPC (works
    for a remote engine too): which of PORTS are free, and /dev/shm's figures and entries."""
    argv = ["-c", _PROBE, json.dumps({"ports": ports})]
    raw = run_probe(image, argv, owner, target, network_mode="host", ipc_mode="host")
    # our own script's line, the shape above
    return cast(HostProbe, json.loads(raw.strip().splitlines()[-1]))
