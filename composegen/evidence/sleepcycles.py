"""`qualify NAME --sleep-cycles N`: is sleep mode trustworthy for this engine on this machine?
(issue 37)

N cycles of the profile's level on the running stack — sleep, wake, one temperature-0 probe — each
timed, with the GPU memory the sleeping engine still holds (its own `… GiB memory is still in use.`
line), the GPU memory in use on its GPUs before the first sleep and after each sleep and wake
(nvidia-smi inside the container when the image has it; an emulated engine: the EMULATED GPU
ledger) and its host's MemAvailable at the same points (/proc/meminfo; a level-1 sleep pins the
weights there). It fails when a wake fails, an answer differs from the one before the first sleep, or that
residue grows by more than MAX_GROWTH_GIB over the cycles (reported on 4x RTX PRO 6000: pinned
memory growing per cycle until outputs broke, vLLM issue 21336). The stack is left awake. The result
goes into the qualify bundle as sleep.json, and the outcome is kept per (vLLM version, model,
emulated or not) in .composegen/standby/qualified.json, which the standby path reads
(edge/standby.py).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TypedDict

from composegen import privatestate
from composegen.errors import ComposegenError, EngineError
from composegen.evidence.reports.sleep import SleepCycle, SleepCycles
from composegen.profiles.resolved import Resolved
from composegen.project import Project
from composegen.stack import driver

MAX_GROWTH_GIB = 0.5
PROBE = {
    "messages": [{"role": "user", "content": "Name three prime numbers."}],
    "max_tokens": 16,
    "temperature": 0,
}


def key_of(r: Resolved, emulated: bool) -> str:
    m = r.profile.model
    return f"vllm {r.profile.vllm_version} · {m.id}@{m.revision or 'main'} · {'emulated' if emulated else 'real'}"


def probe(r: Resolved) -> str:
    """R's answer to the temperature-0 probe (also the standby path's warm-up after a wake)."""
    body = json.dumps({"model": r.profile.model.served_name, **PROBE}).encode()
    reply = driver.endpoint(r).peer.fetch("POST", "/v1/chat/completions", body, deadline_s=120)
    if reply.status != 200:
        raise EngineError(f"the probe answered {reply.status}")
    try:
        return str(json.loads(reply.body)["choices"][0]["message"]["content"])
    except (ValueError, KeyError, IndexError, TypeError):
        raise EngineError("the probe's answer is not a chat completion") from None


class _Meters:
    """The GPU and host memory readings of R's engine (None where they cannot be read)."""

    def __init__(self, project: Project, r: Resolved) -> None:
        self.project, self.r = project, r
        self.ctr = driver.head_container(project, r)
        self.gpu_source: str | None = None
        self.host_source: str | None = None

    def gpu(self) -> dict[str, float] | None:
        found = driver.gpu_memory(self.project, self.ctr) if self.ctr else None
        if found is None:
            return None
        self.gpu_source = found.source
        return found.used_gib

    def host(self) -> float | None:
        found = driver.host_memory(self.r)
        if found is None:
            return None
        self.host_source = "/proc/meminfo of the engine's host"
        return found.available_gib


def _cycle(project: Project, r: Resolved, level: int, row: SleepCycle, meters: _Meters) -> None:
    started = time.monotonic()
    row.residue_gib = driver.sleep_stack(project, r, level).residue_gib
    row.sleep_s = round(time.monotonic() - started, 3)
    row.gpu_gib_after_sleep, row.host_available_gib_after_sleep = meters.gpu(), meters.host()
    row.wake_s = round(driver.wake_stack(project, r), 3)
    row.gpu_gib_after_wake, row.host_available_gib_after_wake = meters.gpu(), meters.host()


def run(project: Project, r: Resolved, n: int, emulated: bool) -> SleepCycles:
    level = r.profile.standby.level if r.profile.standby else 1
    first = probe(r)
    meters = _Meters(project, r)
    gpu_before, host_before = meters.gpu(), meters.host()
    rows: list[SleepCycle] = []
    for cycle in range(1, n + 1):
        row = SleepCycle(cycle=cycle, sleep_s=None, wake_s=None, residue_gib=None, same_answer=None)
        rows.append(row)
        try:
            _cycle(project, r, level, row, meters)
            row.same_answer = probe(r) == first
        except ComposegenError as exc:
            row.error = exc.message[:300]
            break
    residues = [c.residue_gib for c in rows if c.residue_gib is not None]
    growth = round(residues[-1] - residues[0], 3) if len(residues) > 1 else None
    reason = next((f"cycle {c.cycle}: {c.error}" for c in rows if c.error), None)
    reason = reason or next(
        (f"cycle {c.cycle}: the answer changed" for c in rows if c.same_answer is False), None
    )
    if reason is None and growth is not None and growth > MAX_GROWTH_GIB:
        reason = f"the sleeping engine's GPU memory grew {growth:g} GiB over {len(rows)} cycles (> {MAX_GROWTH_GIB})"
    result = SleepCycles(profile=r.name, level=level, cycles=rows, residue_growth_gib=growth, passed=reason is None,
                         reason=reason, emulated=emulated, key=key_of(r, emulated), gpu_gib_before=gpu_before,
                         host_available_gib_before=host_before, gpu_source=meters.gpu_source,
                         host_source=meters.host_source)  # fmt: skip
    _remember(project, result)
    return result


class Kept(TypedDict):
    """One entry of .composegen/standby/qualified.json."""

    passed: bool
    at: str
    profile: str
    level: int
    cycles: int


def _kept_path(project: Project) -> Path:
    return privatestate.state_dir(project, "standby") / "qualified.json"


def _remember(project: Project, result: SleepCycles) -> None:
    path = _kept_path(project)
    doc: dict = privatestate.read_json(path, {})
    doc[result.key] = Kept(passed=result.passed, at=privatestate.stamp(), profile=result.profile,
                           level=result.level, cycles=len(result.cycles))  # fmt: skip
    privatestate.write_json(path, doc)


def recorded(project: Project, r: Resolved, emulated: bool) -> Kept | None:
    """The kept outcome of a sleep qualification for R's engine on this machine, or None (read
    defensively: a record that is not one counts as none)."""
    doc: dict = privatestate.read_json(_kept_path(project), {})
    found = doc.get(key_of(r, emulated))
    if (
        not isinstance(found, dict)
        or not isinstance(found.get("passed"), bool)
        or not isinstance(found.get("at"), str)
    ):
        return None
    level, cycles = (v if isinstance(v := found.get(k), int) else 0 for k in ("level", "cycles"))
    return Kept(
        passed=found["passed"],
        at=found["at"],
        profile=str(found.get("profile")),
        level=level,
        cycles=cycles,
    )
