"""The memory plan for standby (issue 37 item 2): before a standby start or switch, do the awake
engine and every sleeping one fit on the same GPUs, and can host memory hold the level-1 weights?

GPU, per GPU the edge's running stacks share: an awake (or starting) engine holds its
--gpu-memory-utilization share of the GPU (driver.share: vLLM reserves it at start; a wake maps
it back), a sleeping one its own residue as its last sleep kept it (stack/sleepmode.py), or
ESTIMATED_RESIDUE_GIB before it has one. The sum must fit the GPU: an emulated stack's EMU_GPU_GIB
(the size the emulator's GPU ledger enforces), a real one's from a running stack's startup report
(`Free memory on device (F/T GiB)`); unknown, the GPU check is skipped and said so.

Host, level 1: the engine going to sleep moves its weights to pinned host memory (weights per rank ×
ranks, from its startup report); they must fit in MemAvailable minus what the host-memory guard keeps
free (memory_guard.min_available). Engines already asleep hold theirs already (MemAvailable shows
it: 7.9 GiB lower from the first sleep on in the recording). The emulator keeps no host copy: an
emulated stack is checked against an emulated host only when its emulate.env sets EMU_HOST_MEM_GIB.

Refused unless a sleep qualification of that engine at its level passed on this host: any level on
unified memory (GB10 / DGX Spark, probed; a wake has taken the host down: vLLM issue 50011), level 2
with a speculative config (the wake does not reload the draft: vLLM issue 52487).

A refusal is BadInput (exit 2) naming every figure.
"""

from __future__ import annotations

import platform
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from composegen.edge import config
from composegen.edge.config import Edge
from composegen.errors import BadInput
from composegen.evidence import sleepcycles
from composegen.profiles.resolved import Resolved
from composegen.project import Project
from composegen.stack import driver
from composegen.stack.driver import Held

# before an engine has slept: the recording's 0.87-0.91 GiB (H200, 0.60 share), rounded up
ESTIMATED_RESIDUE_GIB = 1.0
UNIFIED = "a unified-memory host (GB10 / DGX Spark: probed), where a wake crashed the host (vLLM issue 50011)"
DRAFT = "level 2 with a speculative config, whose wake does not reload the draft (vLLM issue 52487)"
EPSILON_GIB = 0.005  # figures are printed to 2 decimals: nothing closer than that is a refusal


@dataclass(frozen=True)
class Holder:
    """One engine's hold on each of its GPUs."""

    name: str
    gpus: tuple[str, ...]
    gib: float
    how: str  # "awake: 0.975 x 95.01 GiB", "asleep: its kept share", …


def gpu_problems(holders: Iterable[Holder], size_gib: float) -> list[str]:
    """One line per GPU whose holders do not fit in SIZE_GIB, with every figure."""
    per_gpu: dict[str, list[Holder]] = {}
    for h in holders:
        for gpu in h.gpus:
            per_gpu.setdefault(gpu, []).append(h)
    problems = []
    for gpu, found in sorted(per_gpu.items()):
        used = sum(h.gib for h in found)
        if used > size_gib + EPSILON_GIB:
            parts = " + ".join(f"{h.name} {h.gib:.2f} GiB ({h.how})" for h in found)
            problems.append(f"GPU {gpu}: {parts} = {used:.2f} GiB > {size_gib:.2f} GiB")
    return problems


def host_problem(
    name: str, weights_gib: float, ranks: int, available_gib: float, floor_gib: float
) -> str | None:
    """Level 1: does NAME's weights' host copy fit beside what the guard keeps free?"""
    need, room = weights_gib * ranks, available_gib - floor_gib
    if need <= room + EPSILON_GIB:
        return None
    return (
        f"host memory: {name}'s level-1 sleep keeps its weights in host memory, {weights_gib:.2f} GiB "
        f"x {ranks} rank(s) = {need:.2f} GiB; MemAvailable {available_gib:.2f} GiB - the guard's "
        f"floor {floor_gib:.2f} GiB leaves {room:.2f} GiB"
    )


def ranks(r: Resolved) -> int:
    return int(r.flag("tensor-parallel-size") or 1) * int(r.flag("pipeline-parallel-size") or 1)


# --- what runs now --------------------------------------------------------------------------------
def _running(
    edge: config.Edge, held: Mapping[str, driver.Handle], but: Iterable[str]
) -> list[driver.Handle]:
    """The edge's stacks that run now (other than BUT), awake or asleep; an engine that cannot say
    (still loading) counts as awake: it holds, or will, its share."""
    return [h for name, h in held.items() if name in edge.stacks and name not in but]


def _size(r: Resolved, emulated: bool, others: list[driver.Handle]) -> float | None:
    """One GPU's size in GiB (EMULATED: EMU_GPU_GIB), else a running stack's startup report."""
    real = (driver.gpu_size(o.r, o.ctr, False) for o in others if not o.ctr.emulated)
    return driver.gpu_size(r, None, emulated=True) if emulated else next(filter(None, real), None)


def _awake(r: Resolved, size: float, state: str = "awake") -> Holder:
    share = driver.share(r)  # the one model of an awake engine's hold (stack/sleepmode.py)
    return Holder(r.name, tuple(r.profile.service.gpus.ids()), share * size,
                  f"{state}: {share} x {size:.2f} GiB")  # fmt: skip


def _asleep(r: Resolved, residue: float | None) -> Holder:
    gib, how = (residue, "asleep: its kept share") if residue is not None else (
        ESTIMATED_RESIDUE_GIB, "asleep: estimated")  # fmt: skip
    return Holder(r.name, tuple(r.profile.service.gpus.ids()), gib, how)


def _holder(o: driver.Handle, size: float) -> Holder:
    return _awake(o.r, size) if o.asleep is None else _asleep(o.r, o.asleep.residue_gib)


def _refuse(what: str, problems: list[str], hint: str) -> None:
    if problems:
        raise BadInput(f"{what}: {'; '.join(problems)}", hint=hint)


# --- the checks -----------------------------------------------------------------------------------
def check_start(project: Project, r: Resolved, emulated: bool, standby: bool) -> None:
    """Before `up NAME` of a stack behind the edge: with --standby, or while another standby stack
    of the edge runs, NAME starting awake must fit beside what the others hold; standby on unified
    memory and level 2 with a draft need a passed sleep qualification here."""
    if not config.configured(project):
        return
    edge = config.load(project)
    if r.name not in edge.stacks or r.profile.nodes is not None:
        return
    held = driver.handles(project, known=edge.stacks)
    if r.name in held:
        return  # nothing starts: `up` follows the running stack
    others = _running(edge, held, [r.name])
    if standby:
        _check_qualified(project, r, emulated)
    if not standby and not any(o.r.profile.standby for o in others):
        return
    size = _size(r, emulated, others)
    if size is None:
        return  # a real GPU's size is known once a stack has started on it
    problems = gpu_problems(
        [_awake(r, size, "starting"), *(_holder(o, size) for o in others)], size
    )
    _refuse(f"{r.name} cannot start beside the edge's running stacks", problems,
            "put the awake one to sleep first (`composegen up NAME --standby` starts a stack and "
            "sleeps it), or lower gpu-memory-utilization (docs/standby.md)")  # fmt: skip


def check_sleep(project: Project, r: Resolved, ctr: driver.ContainerFacts | None) -> None:
    """Before R (running in CTR) goes to sleep at level 1: its weights' host copy fits (unified
    memory: refused unless qualified)."""
    _check_qualified(project, r, bool(ctr and ctr.emulated))
    if r.profile.standby is None or r.profile.standby.level != 1:
        return
    problem = _host_problem(r, ctr)
    _refuse(f"{r.name} cannot sleep at level 1", [problem] if problem else [],
            "free host memory, or `standby: {level: 2}` (the weights are discarded and reloaded "
            "from disk at the wake)")  # fmt: skip


def check_switch(
    project: Project, edge: Edge, current: str, target: str, emulated: bool, held: Held = None
) -> None:
    """Before a standby switch: TARGET awake beside CURRENT asleep and every other running stack,
    and CURRENT's level-1 host copy. HELD: the switch's handles (else looked up now)."""
    old, new = edge.stacks[current], edge.stacks[target]
    held = driver.handles(project, known=edge.stacks) if held is None else held
    others = _running(edge, held, [current, target])
    size = _size(new, emulated, [*others, *([held[current]] if current in held else [])])
    if size is not None:
        # what OLD kept the last time it slept, its own share (estimated if it never slept)
        holders = [_awake(new, size, "waking"), _asleep(old, driver.residue_kept(project, current)),
                   *(_holder(o, size) for o in others)]  # fmt: skip
        _refuse(f"{target} cannot wake beside {current} asleep", gpu_problems(holders, size),
                "put the other awake stacks to sleep or down first (docs/standby.md)")  # fmt: skip
    check_sleep(project, old, held[current].ctr if current in held else None)


def _check_qualified(project: Project, r: Resolved, emulated: bool) -> None:
    """Sleep whose failure equality cannot see: refused unless a sleep qualification of R's engine
    at its level passed on this host (the module's docstring)."""
    host, sb = driver.host_memory(r), r.profile.standby
    unified = host is not None and host.unified
    why = [UNIFIED] if unified else []
    why += [DRAFT] if sb is not None and sb.level == 2 and r.flag("speculative-config") else []
    kept = sleepcycles.recorded(project, r, emulated) if why else None
    if not why or (kept and kept["passed"]):
        return
    raise BadInput(
        f"{r.name}: standby on {' and '.join(why)}; no sleep qualification of this engine at level "
        f"{sb.level if sb else 1} passed on this host ({platform.node()})",
        hint=f"`composegen qualify {r.name} --sleep-cycles 10` here first",
    )


def _host_problem(r: Resolved, ctr: driver.ContainerFacts | None) -> str | None:
    host = driver.host_memory(r)
    if host is None or ctr is None or not ctr.running:
        return None  # a remote engine's host is not read from here
    available = host.available_gib
    if ctr.emulated:
        emulated_host = r.profile.emulate.env.get("EMU_HOST_MEM_GIB")
        if not emulated_host:
            return None  # the emulator keeps no host copy
        available = float(emulated_host)
    weights = driver.startup_check(r, ctr).weights_gib
    if weights is None:
        return None
    return host_problem(r.name, float(weights), ranks(r), available, host.floor_gib)
