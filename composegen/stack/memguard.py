"""The host-memory guard (docs/weights.md): on a unified-memory host (DGX Spark's GB10, Tegra) the
GPU allocates from system memory, and running out while the weights load hard-resets the machine
instead of raising an out-of-memory error. So preflight refuses `up` below
`service.memory_guard.min_available`, and while `up`/`wait` waits a watcher reads MemAvailable every
POLL_S; below the floor it stops the stack (SIGTERM, then SIGKILL after STOP_GRACE_S), exit 3."""

from __future__ import annotations

import contextlib
import glob
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from composegen.errors import BadInput, EngineError
from composegen.profiles.resolved import Resolved
from composegen.stack import engine
from composegen.stack.placement import Deployment, NodeRef
from composegen.stack.preflight import Check
from composegen.stack.targets import Target
from composegen.units import parse_bytes

MEMINFO_ENV = "COMPOSEGEN_MEMINFO"
NVIDIA_GPUS = (
    "/proc/driver/nvidia/gpus/*/information"  # the driver's: "Model: NVIDIA GB10" on a Spark
)
POLL_S = 0.25
STOP_GRACE_S = 1  # the load is what eats memory: a short grace, then kill, well inside 2 s

_UNIFIED_PY = r"""
import glob, json, os
def unified():
    for path in glob.glob("/proc/driver/nvidia/gpus/*/information"):
        try:
            text = open(path, encoding="utf-8", errors="replace").read()
        except OSError:
            continue
        if "GB10" in text:
            return True
    return os.path.exists("/etc/nv_tegra_release")
print(json.dumps({"meminfo": open("/proc/meminfo").read(), "unified": unified()}))
"""


@dataclass(frozen=True)
class Memory:
    available: int  # bytes
    total: int

    def text(self) -> str:
        return f"MemAvailable {self.available / 2**30:.1f} GiB of {self.total / 2**30:.1f} GiB"


def parse_meminfo(text: str, source: str = "/proc/meminfo") -> Memory:
    values = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            values[key.strip()] = int(parts[0]) * (1024 if parts[1:2] == ["kB"] else 1)
    if "MemAvailable" not in values:
        why = "(kernel older than 3.14, or not a meminfo file)"
        raise EngineError(f"{source} has no MemAvailable line {why}")
    return Memory(values["MemAvailable"], values.get("MemTotal", 0))


def read_local() -> Memory:
    path = os.environ.get(MEMINFO_ENV) or "/proc/meminfo"
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return parse_meminfo(fh.read(), path)
    except OSError as exc:
        raise EngineError(f"cannot read {path}: {exc.strerror}") from None


def unified_local() -> bool:
    for path in glob.glob(NVIDIA_GPUS):
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                if "GB10" in fh.read():
                    return True
        except OSError:
            continue
    return os.path.exists("/etc/nv_tegra_release")


def read_remote(image: str, owner: str, target: Target) -> tuple[Memory, bool]:
    """MemAvailable and unified-memory detection of a remote node's host, through its engine."""
    raw = engine.run_probe(image, ["-c", _UNIFIED_PY], owner, target, network_mode="none")
    found = json.loads(raw.strip().splitlines()[-1])
    meminfo = parse_meminfo(found["meminfo"], f"/proc/meminfo on {target.label}")
    return meminfo, bool(found["unified"])


def floor_bytes(r: Resolved) -> int:
    guard = r.profile.service.memory_guard
    value = parse_bytes(guard.min_available)
    if value is None:  # the schema's pattern makes this unreachable; say so clearly anyway
        what = f"service.memory_guard.min_available: not a size: {guard.min_available!r}"
        raise BadInput(f"{r.path}: {what}")
    return value


def judge(
    node: str, mem: Memory, floor: int, declared: bool | None, detected: bool
) -> tuple[str, str]:
    """(status, message) of the preflight check for one node."""
    if declared is False or (declared is None and not detected):
        off = "not a unified-memory host, guard off (memory_guard.unified: true turns it on)"
        return "ok", f"{mem.text()}; {off}"
    unified = f"{floor / 2**30:.1f} GiB (unified memory, {'declared' if declared else 'detected'})"
    if mem.available < floor:
        risk = "loading could exhaust host memory and hard-reset the machine"
        how = "free memory (stop other stacks, drop caches) or lower service.memory_guard.min_available"
        return "fail", f"{node}: {mem.text()}, below the floor of {unified}: {risk}; {how}"
    return "ok", f"{mem.text()}, floor {unified}; watched until ready"


class MemoryLow(EngineError):
    """The watcher stopped the stack: exit 3."""


class Watcher:
    """Reads every node's MemAvailable every POLL_S on a thread; below the floor it calls `stop` at
    once (not waiting for the waiting loop) and `check()` raises MemoryLow in the waiting thread."""

    def __init__(
        self,
        floor: int,
        readers: dict[str, Callable[[], Memory]],
        stop: Callable[[], None],
        poll_s: float = POLL_S,
    ):
        self.floor, self.readers, self._stop_stack, self.poll_s = floor, readers, stop, poll_s
        self.tripped: tuple[str, Memory, float] | None = None
        self.closers: list[Callable[[], None]] = []  # e.g. a remote node's streaming probe
        self.stop_error: str | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="composegen-memguard", daemon=True)

    def start(self) -> Watcher:
        self._thread.start()
        return self

    def close(self) -> None:
        self._done.set()
        self._thread.join(5)
        for close in self.closers:
            close()

    def __enter__(self) -> Watcher:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self) -> None:
        while not self._done.is_set():
            for node, read in self.readers.items():
                try:
                    mem = read()
                except EngineError:
                    continue  # a failed reading is no reading; the next poll tries again
                if mem.available < self.floor:
                    self.tripped = (node, mem, time.time())
                    try:
                        self._stop_stack()
                    except EngineError as exc:
                        self.stop_error = exc.message
                    self._done.set()
                    return
            self._done.wait(self.poll_s)

    def check(self) -> None:
        """Raise MemoryLow once the floor was crossed (called from the waiting loop's tick)."""
        if self.tripped is None:
            return
        node, mem, _ = self.tripped
        stopped = "the stack was stopped (SIGTERM, then SIGKILL)"
        stopped = f"stop failed: {self.stop_error}" if self.stop_error else stopped
        floor = f"the memory guard's floor of {self.floor / 2**30:.1f} GiB"
        raise MemoryLow(
            f"node {node}: {mem.text()} fell below {floor} while loading; {stopped} before host "
            "memory ran out",
            hint="free host memory, or lower gpu-memory-utilization / max-model-len; the floor is "
            "service.memory_guard.min_available",
        )


_STREAM_PY = r"""
import sys, time
interval, until = float(sys.argv[1]), time.monotonic() + float(sys.argv[2])
while time.monotonic() < until:
    with open("/proc/meminfo") as fh:
        v = {l.split(":")[0]: l.split()[1] for l in fh if l.startswith(("MemAvailable:", "MemTotal:"))}
    print(v.get("MemAvailable", "-1"), v.get("MemTotal", "0"), flush=True)
    time.sleep(interval)
"""
STALE_S = 3.0


class RemoteMemory:
    """MemAvailable of a remote node's host, streamed: one probe container prints it every POLL_S
    and a thread keeps the latest line (a probe container per reading would take ~1 s over ssh). The
    probe ends by itself after `lifetime` seconds; `close()` removes it at once."""

    def __init__(self, image: str, owner: str, target: Target, lifetime: float) -> None:
        self.label = target.label
        self.latest: tuple[Memory, float] | None = None
        argv = ["-c", _STREAM_PY, str(POLL_S), str(int(lifetime))]
        self.ctr = engine.start_probe(image, argv, owner, target, network_mode="none")
        self.stream = engine.LogStream(self.ctr, tail=0)
        threading.Thread(target=self._pump, name=f"memguard-{self.label}", daemon=True).start()

    def _pump(self) -> None:
        for _, line in self.stream.lines():
            parts = line.split()
            if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
                self.latest = (Memory(int(parts[0]) * 1024, int(parts[1]) * 1024), time.monotonic())

    def read(self) -> Memory:
        if self.latest is None or time.monotonic() - self.latest[1] > STALE_S:
            raise EngineError(f"no MemAvailable reading from {self.label} for {STALE_S:.0f} s")
        return self.latest[0]

    def close(self) -> None:
        self.stream.close()
        with contextlib.suppress(EngineError):  # labelled: the next `up` of this profile removes it
            engine.remove_container(self.ctr)


# ---- up: preflight and the watch, for every node -------------------------------------------------


def _reader(n: NodeRef, image: str | None) -> Callable[[], tuple[Memory, bool]]:
    if n.target.is_local:
        return lambda: (read_local(), unified_local())
    return lambda: read_remote(image or "", n.project, n.target)


def preflight_checks(dep: Deployment, image: str | None) -> tuple[list[Check], bool]:
    """One `memory` check per node, and whether the guard is on (some node is unified-memory)."""
    r = dep.r
    floor, declared = floor_bytes(r), r.profile.service.memory_guard.unified
    checks, on = [], False
    for n in dep.nodes:
        name = n.named("memory")
        try:
            mem, detected = _reader(n, image)()
        except EngineError as exc:
            checks.append(Check(name, "warn", f"MemAvailable not readable: {exc.message}"))
            continue
        status, message = judge(n.name or "this host", mem, floor, declared, detected)
        on = on or declared is True or (declared is None and detected)
        checks.append(Check(name, status, message))
    return checks, on


def watch(dep: Deployment, image: str | None) -> Watcher:
    """Start the watcher for every node; below the floor it stops every node's stack containers."""
    r = dep.r

    def stop() -> None:
        listed = [engine.project_containers(n.project, n.target) for n in dep.nodes]
        ctrs = [c for ctrs in listed for c in ctrs if c.running]
        stop = engine.stop_container
        threads = [threading.Thread(target=stop, args=(c, STOP_GRACE_S)) for c in ctrs]
        # every node at once: the floor is crossed now, not after the head's grace
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)

    readers: dict[str, Callable[[], Memory]] = {}
    remotes: list[RemoteMemory] = []
    for n in dep.nodes:
        if n.target.is_local:
            readers[n.name or "this host"] = read_local
        else:
            lifetime = r.profile.service.startup_timeout + 120
            try:
                remotes.append(
                    RemoteMemory(image or r.profile.image, n.project, n.target, lifetime)
                )
            except EngineError:
                # preflight read this node; a watch that cannot start does not stop the run
                continue
            readers[n.name or n.target.label] = remotes[-1].read
    guard = Watcher(floor_bytes(r), readers, stop)
    guard.closers += [m.close for m in remotes]
    return guard.start()


def watch_when_on(dep: Deployment, image: str | None) -> Watcher | None:
    """For `wait` on a stack another command started: the watcher when the guard applies (declared,
    or a unified-memory node detected), else None."""
    declared = dep.r.profile.service.memory_guard.unified
    if declared is False:
        return None
    if declared is None:
        try:
            if not any(_reader(n, image)()[1] for n in dep.nodes):
                return None
        except EngineError:
            return None
    return watch(dep, image)
