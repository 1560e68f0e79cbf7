"""`qualify NAME --sleep-cycles N`'s record: sleep.json in the bundle, `sleep` in `qualify
--json`."""

from __future__ import annotations

from pydantic import Field

from composegen.report import Report


class SleepCycle(Report):
    cycle: int
    sleep_s: float | None
    wake_s: float | None
    residue_gib: float | None = Field(
        description="GPU memory the sleeping engine still held (its own log line)"
    )
    same_answer: bool | None = Field(
        description="the temperature-0 probe after the wake equals the first answer"
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
    key: str = Field(
        description="what the outcome is kept for: vLLM version, model@revision, emulated or real"
    )
