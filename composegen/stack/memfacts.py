"""Memory facts the standby plan and the sleep-cycle record read: the engine host's memory and the
GPU memory a running engine's GPUs hold.

- host: /proc/meminfo of this machine (the engine's host when the engine is local; COMPOSEGEN_MEMINFO
  as for the host-memory guard), whether it is unified memory (probed: a GB10 or Tegra, never
  assumed; or declared in memory_guard.unified) and the guard's floor. A remote engine's host is not
  read here: None.
- GPU, real: `nvidia-smi --query-gpu=index,memory.used,memory.total` inside the container (when the
  image has it; None otherwise). Emulated: the emulated GPUs' ledger in .composegen/emulated-gpus/
  (composegen/sizing/ledger.py), every live engine's holding summed per GPU — EMULATED figures."""

from __future__ import annotations

from dataclasses import dataclass

from composegen.errors import EngineError
from composegen.profiles.resolved import Resolved
from composegen.project import Project
from composegen.sizing import ledger as gpuledger
from composegen.stack import emulate, engine, memguard, placement
from composegen.stack.facts import ContainerFacts

GiB = 1 << 30
SMI = ["nvidia-smi", "--query-gpu=index,memory.used,memory.total", "--format=csv,noheader,nounits"]


@dataclass(frozen=True)
class HostMemory:
    available_gib: float
    total_gib: float
    unified: bool  # probed (or declared): the GPU allocates from this memory
    floor_gib: float  # what the host-memory guard keeps free (memory_guard.min_available)


@dataclass(frozen=True)
class GpuMemory:
    used_gib: dict[str, float]  # per GPU id: what every process on it holds
    total_gib: float | None
    source: str  # "nvidia-smi in the container" | "EMULATED ledger"


def host_memory(r: Resolved) -> HostMemory | None:
    """This machine's memory when R's engine runs here; None for a remote engine."""
    if not placement.nodes(r)[0].target.is_local:
        return None
    mem = memguard.read_local()
    declared = r.profile.service.memory_guard.unified
    unified = declared if declared is not None else memguard.unified_local()
    gib = lambda n: round(n / GiB, 2)  # noqa: E731
    avail, total, floor = gib(mem.available), gib(mem.total), gib(memguard.floor_bytes(r))
    return HostMemory(available_gib=avail, total_gib=total, unified=unified, floor_gib=floor)


def gpu_memory(project: Project, ctr: ContainerFacts) -> GpuMemory | None:
    """What the GPUs of CTR's engine hold now; None when it cannot be read."""
    if ctr.emulated:
        return _ledger(project)
    try:
        code, text = engine.exec_output(ctr, SMI, max_bytes=8192)
    except EngineError:
        return None
    if code != 0:
        return None  # no nvidia-smi in the image: nothing to read
    used, total = {}, None
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3 and all(p.replace(".", "").isdigit() for p in parts):
            used[parts[0]] = round(float(parts[1]) / 1024, 2)  # MiB
            total = round(float(parts[2]) / 1024, 2)
    return GpuMemory(used, total, "nvidia-smi in the container") if used else None


def _ledger(project: Project) -> GpuMemory | None:
    used: dict[str, float] = {}
    total = None
    for doc in gpuledger.read_entries(emulate.ledger_dir(project)):
        total = doc.get("total_gib", total)
        for gpu in doc.get("gpus") or []:
            used[gpu] = round(used.get(gpu, 0.0) + float(doc.get("gib") or 0.0), 3)
    return GpuMemory(used, total, "EMULATED ledger") if used else None
