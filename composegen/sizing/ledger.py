"""One GPU's memory shared by every emulated engine on it (EMULATED: no GPU is touched).

A real vLLM sees what other processes hold on its GPUs; emulated engines in separate containers
cannot, so they keep a ledger in a directory every emulated container of a project mounts
(EMU_GPU_LEDGER; `up --emulate` mounts .composegen/emulated-gpus/ there, stack/emulate.py) and
name their GPUs in EMU_GPU_IDS ("0,1", from the profile's device_ids). Each engine keeps one entry,
`<engine>.json` {"engine", "gpus", "gib", "state"}: the GiB it holds on each of its GPUs — its
--gpu-memory-utilization share awake, the residue asleep. A GPU's size is the engine's EMU_GPU_GIB.

- start: free = size − what the others hold on the fullest of its GPUs; below the requested share
  the engine fails as vLLM's startup memory check does (emulator/runner.py writes its line), and
  registers nothing.
- sleep: the entry drops to the residue; wake: it takes the share back, or fails as vLLM's cumem
  allocator does (`CUDA Error: out of memory at …cumem_allocator.cpp:62`) and stays asleep.
- an engine holds an flock on its own entry for its life: an entry whose lock can be taken belongs
  to an engine that is gone (SIGKILL included) and is not counted. One lock file
  (`ledger.lock`) makes check-and-claim atomic across containers."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import socket
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

# One emulated GPU (printed 95.01 GiB): with exactly 95.01 the seed's 4,096 arm's KV would print as
# 15.98 (emulator/memory.py).
DEFAULT_GPU_GIB = 95.0125
LEDGER_ENV = "EMU_GPU_LEDGER"
IDS_ENV = "EMU_GPU_IDS"
ENGINE_ENV = "EMU_GPU_ENGINE"
LOCK_NAME = "ledger.lock"
_SAFE = re.compile(r"[^A-Za-z0-9._-]")


WAKE_ERROR = "CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62"


def gpu_gib(env: Mapping[str, str]) -> float:
    """One emulated GPU's size for an emulate.env (EMU_GPU_GIB, else the emulator's default): what
    the standby plan sizes an emulated stack's GPUs by, as this ledger does."""
    try:
        return float(env.get("EMU_GPU_GIB") or DEFAULT_GPU_GIB)
    except ValueError:
        return DEFAULT_GPU_GIB


def read_entries(root: Path) -> list[dict]:
    """Every live entry in ROOT (stale ones, whose engine is gone, are left out); also read by
    composegen on the host for the sleep-cycle record."""
    found = []
    for path in sorted(root.glob("*.json")):
        doc = _live(path)
        if doc is not None:
            found.append(doc)
    return found


def _live(path: Path) -> dict | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:  # held: its engine is alive
            with os.fdopen(os.dup(fd), encoding="utf-8") as fh:
                doc = json.loads(fh.read() or "null")
            return doc if isinstance(doc, dict) else None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None  # nobody holds it: the engine that wrote it is gone
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)


@dataclass
class Ledger:
    root: Path
    gpus: list[str]
    total_gib: float
    engine: str
    fd: int | None = None  # our entry, flocked while we hold memory

    @classmethod
    def from_env(cls, env: Mapping[str, str], total_gib: float) -> Ledger | None:
        root = env.get(LEDGER_ENV)
        if not root:
            return None
        gpus = [g.strip() for g in (env.get(IDS_ENV) or "0").split(",") if g.strip()]
        engine = env.get(ENGINE_ENV) or f"{socket.gethostname()}-{os.getpid()}"
        return cls(Path(root), gpus or ["0"], total_gib, _SAFE.sub("_", engine))

    @property
    def entry(self) -> Path:
        return self.root / f"{self.engine}.json"

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        fd = os.open(self.root / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _others(self) -> dict[str, float]:
        """GiB the other live engines hold on each of our GPUs."""
        held = dict.fromkeys(self.gpus, 0.0)
        for doc in read_entries(self.root):
            if doc.get("engine") == self.engine:
                continue
            for gpu in doc.get("gpus") or []:
                if gpu in held:
                    held[gpu] += float(doc.get("gib") or 0.0)
        return held

    def _fullest(self) -> tuple[str, float]:
        """(vLLM's name of the fullest of our GPUs, its free GiB)."""
        gpu, used = max(self._others().items(), key=lambda kv: kv[1])
        return f"cuda:{self.gpus.index(gpu)}", self.total_gib - used

    def claim(self, gib: float) -> tuple[str, float, bool]:
        """Start or wake: (device, free GiB, claimed); claimed only when GIB fits beside the others."""
        with self._locked():
            gpu, free = self._fullest()
            if free < gib:
                return gpu, free, False
            self._write(gib, "awake")
            return gpu, free, True

    def hold(self, gib: float, state: str) -> None:
        """Sleep: what we hold drops (to the residue)."""
        with self._locked():
            self._write(gib, state)

    def release(self) -> None:
        if self.fd is None:
            return
        with self._locked():
            self.entry.unlink(missing_ok=True)
            os.close(self.fd)
            self.fd = None

    def _write(self, gib: float, state: str) -> None:
        if self.fd is None:
            self.fd = os.open(self.entry, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        doc = {"engine": self.engine, "gpus": self.gpus, "gib": round(gib, 3), "state": state}
        data = json.dumps({**doc, "total_gib": self.total_gib}).encode()
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, data, 0)
