"""`qualify NAME --sleep-cycles N`: is sleep mode trustworthy for this engine on this machine?
(issue 37)

N cycles of the profile's level on the running stack — sleep, wake, one temperature-0 probe — each
timed, with the GPU memory the sleeping engine still holds (its own share, stack/sleepmode.py), the
GPU memory in use on its GPUs before the first sleep and after each sleep and wake (nvidia-smi in
the container when the image has it; an emulated engine: the EMULATED GPU ledger) and its host's
MemAvailable at the same points (/proc/meminfo; a level-1 sleep pins the weights there). It fails
when a wake fails, an answer (the model's, each LoRA adapter's: vLLM issue 53888) differs from the
one before the first sleep, that residue grows by more than MAX_GROWTH_GIB over the cycles
(reported on 4x RTX PRO 6000: pinned memory growing per cycle until outputs broke, vLLM issue
21336), or the draft's acceptance over a probe (spec_decode_* on /metrics) falls below
MIN_ACCEPTANCE_KEPT of the first's (vLLM issue 52487). The stack is left awake. The result goes
into the qualify bundle as sleep.json, and the outcome is kept per (vLLM version, model, emulated
or not, level, draft, host) in .composegen/standby/qualified.json, which the standby path and the
memory plan read (edge/standby.py, edge/standbyplan.py).
"""

from __future__ import annotations

import contextlib
import json
import platform
import time
from pathlib import Path
from typing import TypedDict

from composegen import privatestate
from composegen.bench import closed
from composegen.errors import ComposegenError, EngineError
from composegen.evidence.reports.sleep import SleepCycle, SleepCycles
from composegen.profiles.resolved import Resolved
from composegen.project import Project
from composegen.stack import driver

MAX_GROWTH_GIB = 0.5
MIN_ACCEPTANCE_KEPT = 0.5  # of the first probe's; at temperature 0 the same probe drafts alike
PROBE = {
    "messages": [{"role": "user", "content": "Name three prime numbers."}],
    "max_tokens": 16,
    "temperature": 0,
}


def key_of(r: Resolved, emulated: bool) -> str:
    m = r.profile.model
    return f"vllm {r.profile.vllm_version} · {m.id}@{m.revision or 'main'} · {'emulated' if emulated else 'real'}"


def adapters(r: Resolved) -> list[str]:
    """R's LoRA adapters by name (--lora-modules: `name=path`, or JSON with a name)."""
    names = []
    for m in map(str, r.flag("lora-modules") or []):
        with contextlib.suppress(ValueError, AttributeError):  # not JSON: taken as written
            m = str(json.loads(m).get("name")) if m[:1] == "{" else m
        names.append(m.partition("=")[0])
    return names


def probe(r: Resolved, model: str | None = None) -> str:
    """R's answer to the temperature-0 probe (also the standby path's warm-up after a wake); MODEL:
    a LoRA adapter's name."""
    body = json.dumps({"model": model or r.profile.model.served_name, **PROBE}).encode()
    reply = driver.endpoint(r).peer.fetch("POST", "/v1/chat/completions", body, deadline_s=120)
    if reply.status != 200:
        raise EngineError(f"the probe answered {reply.status}")
    try:
        return str(json.loads(reply.body)["choices"][0]["message"]["content"])
    except (ValueError, KeyError, IndexError, TypeError):
        raise EngineError("the probe's answer is not a chat completion") from None


def _probed(r: Resolved) -> tuple[str, float | None]:
    """The probe's answer, and the draft's acceptance over it: accepted / drafted tokens from vLLM's
    spec-decode counters on /metrics before and after (None: nothing drafted)."""
    then, answer, now = _spec(r), probe(r), _spec(r)
    if not then or not now or now[1] <= then[1]:
        return answer, None
    return answer, round((now[0] - then[0]) / (now[1] - then[1]), 3)


def _spec(r: Resolved) -> tuple[float, float] | None:
    """(accepted, drafted) tokens so far (None: no spec-decode counters)."""
    reply = driver.endpoint(r).peer.fetch("GET", "/metrics", deadline_s=10, cap=16 << 20)
    found = closed.spec_of(reply.body.decode("utf-8", "replace")) if reply.status == 200 else None
    return (found.accepted, found.draft_tokens) if found else None


def _dropped(rows: list[SleepCycle], before: float | None) -> str | None:
    """The first cycle whose probe's draft acceptance fell below MIN_ACCEPTANCE_KEPT of BEFORE."""
    for c in rows:
        after = c.draft_acceptance if before else None
        if before and after is not None and after < before * MIN_ACCEPTANCE_KEPT:
            fell = f"the draft's acceptance fell from {before:g} to {after:g}"
            return f"cycle {c.cycle}: {fell} (a draft the wake did not reload? vLLM issue 52487)"
    return None


class _Meters:
    """The GPU and host memory readings of R's engine (None where they cannot be read)."""

    def __init__(self, project: Project, r: Resolved) -> None:
        self.project, self.r = project, r
        self.ctr = driver.head_container(project, r)
        self.gpu_source: str | None = None
        self.host_source: str | None = None

    def gpu(self) -> dict[str, float] | None:
        found = driver.gpu_memory(self.project, self.ctr) if self.ctr else None
        self.gpu_source = found.source if found else self.gpu_source
        return found.used_gib if found else None

    def host(self) -> float | None:
        found = driver.host_memory(self.r)
        self.host_source = "/proc/meminfo of the engine's host" if found else self.host_source
        return found.available_gib if found else None


def _cycle(project: Project, r: Resolved, level: int, row: SleepCycle, meters: _Meters) -> None:
    started = time.monotonic()
    row.residue_gib = driver.sleep_stack(project, r, level).residue_gib
    row.sleep_s = round(time.monotonic() - started, 3)
    row.gpu_gib_after_sleep, row.host_available_gib_after_sleep = meters.gpu(), meters.host()
    row.wake_s = round(driver.wake_stack(project, r), 3)
    row.gpu_gib_after_wake, row.host_available_gib_after_wake = meters.gpu(), meters.host()


def run(project: Project, r: Resolved, n: int, emulated: bool) -> SleepCycles:
    level = r.profile.standby.level if r.profile.standby else 1
    first, accepted = _probed(r)
    lora = {name: probe(r, name) for name in adapters(r)}  # each adapter too (vLLM issue 53888)
    meters = _Meters(project, r)
    gpu_before, host_before = meters.gpu(), meters.host()
    rows: list[SleepCycle] = []
    for cycle in range(1, n + 1):
        row = SleepCycle(cycle=cycle, sleep_s=None, wake_s=None, residue_gib=None, same_answer=None)
        rows.append(row)
        try:
            _cycle(project, r, level, row, meters)
            answer, row.draft_acceptance = _probed(r)
            row.same_answer = answer == first and all([probe(r, a) == lora[a] for a in lora])
        except ComposegenError as exc:
            row.error = exc.message[:300]
            break
    residues = [c.residue_gib for c in rows if c.residue_gib is not None]
    growth = round(residues[-1] - residues[0], 3) if len(residues) > 1 else None
    reason = next((f"cycle {c.cycle}: {c.error}" for c in rows if c.error), None)
    reason = reason or next(
        (f"cycle {c.cycle}: the answer changed" for c in rows if c.same_answer is False), None
    )
    reason = reason or _dropped(rows, accepted)
    if reason is None and growth is not None and growth > MAX_GROWTH_GIB:
        reason = f"the sleeping engine's GPU memory grew {growth:g} GiB over {len(rows)} cycles (> {MAX_GROWTH_GIB})"
    result = SleepCycles(profile=r.name, level=level, cycles=rows, residue_growth_gib=growth, passed=reason is None,
                         reason=reason, emulated=emulated, key=key_of(r, emulated), gpu_gib_before=gpu_before,
                         host_available_gib_before=host_before, gpu_source=meters.gpu_source,
                         draft_acceptance_before=accepted,
                         host_source=meters.host_source)  # fmt: skip
    _remember(project, r, result)
    return result


class Kept(TypedDict):
    """One entry of .composegen/standby/qualified.json."""

    passed: bool
    at: str
    profile: str
    level: int
    cycles: int
    host: str  # the machine it ran on (platform.node())


def _kept_path(project: Project) -> Path:
    return privatestate.state_dir(project, "standby") / "qualified.json"


def _entry(r: Resolved, emulated: bool) -> str:
    """qualified.json's key: the engine, its level and draft, this host (a pass elsewhere, or of
    another level, proves nothing here)."""
    level = r.profile.standby.level if r.profile.standby else 1
    draft = " + draft" if r.flag("speculative-config") else ""
    return f"{key_of(r, emulated)} · level {level}{draft} · on {platform.node()}"


def _remember(project: Project, r: Resolved, result: SleepCycles) -> None:
    path = _kept_path(project)
    doc: dict = privatestate.read_json(path, {})
    doc[_entry(r, result.emulated)] = Kept(passed=result.passed, at=privatestate.stamp(),
                                           profile=result.profile, level=result.level,
                                           cycles=len(result.cycles), host=platform.node())  # fmt: skip
    privatestate.write_json(path, doc)


def recorded(project: Project, r: Resolved, emulated: bool) -> Kept | None:
    """The kept outcome of a sleep qualification of R's engine at its level on this machine, or
    None (read defensively: a record that is not one counts as none)."""
    doc: dict = privatestate.read_json(_kept_path(project), {})
    found = doc.get(_entry(r, emulated))
    if not isinstance(found, dict) or not isinstance(found.get("passed"), bool):
        return None
    return Kept(**{k: found.get(k) for k in Kept.__annotations__})  # type: ignore[typeddict-item]
