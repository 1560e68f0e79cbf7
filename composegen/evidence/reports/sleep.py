"""`qualify NAME --sleep-cycles N`'s record: sleep.json in the bundle, `sleep` in `qualify
--json`."""

from __future__ import annotations

from pydantic import Field

from composegen.report import Report, described, nullable


class SleepCycle(Report):
    cycle: int
    sleep_s: float | None
    wake_s: float | None
    residue_gib: float | None = described(
        "GPU memory the sleeping engine still held: its own share (vLLM's GPU-wide "
        "`still in use` line minus what the other stacks on its GPUs hold)"
    )
    same_answer: bool | None = described(
        "the temperature-0 probe after the wake equals the first answer"
    )
    draft_acceptance: float | None = nullable("accepted/drafted after wake")
    gpu_gib_after_sleep: dict[str, float] | None = nullable(
        "GiB in use per GPU id after the sleep (every process on it; see gpu_source)"
    )
    gpu_gib_after_wake: dict[str, float] | None = nullable("GiB in use per GPU id after the wake")
    host_available_gib_after_sleep: float | None = nullable(
        "MemAvailable of the engine's host after the sleep (level 1 pins the weights)"
    )
    host_available_gib_after_wake: float | None = nullable(
        "MemAvailable of the engine's host after the wake"
    )
    error: str | None = None


class SleepCycles(Report):
    profile: str
    level: int
    cycles: list[SleepCycle]
    residue_growth_gib: float | None = Field(description="last cycle's residue minus the first's")
    passed: bool
    reason: str | None
    emulated: bool
    draft_acceptance_before: float | None = nullable("the first probe's")
    gpu_gib_before: dict[str, float] | None = nullable(
        "GiB in use per GPU id before the first sleep, the engine awake"
    )
    host_available_gib_before: float | None = nullable(
        "MemAvailable of the engine's host before the first sleep"
    )
    gpu_source: str | None = nullable(
        "where the GPU figures come from: nvidia-smi in the container (measured), the "
        "EMULATED ledger, or null (not readable)"
    )
    host_source: str | None = nullable(
        "/proc/meminfo of the engine's host (measured), or null (a remote engine)"
    )
    key: str = described(
        "what the outcome is kept for: vLLM version, model@revision, emulated or real"
    )
