"""The JSON shape of `composegen doctor` (`composegen schema --report doctor`): each check, what it
found and its fix."""

from __future__ import annotations

from typing import Literal

from composegen.report import Report


class DoctorCheck(Report):
    name: Literal["engine", "compose", "base-image", "python"]
    ok: bool
    detail: str  # what was found (or tried)
    fix: str | None = None  # the command or setting that mends it


class DoctorReport(Report):
    ok: bool
    engine: str  # the engine tried: DOCKER_HOST=…, DOCKER_CONTEXT=… or the default socket
    base_image: str  # what `up --emulate` builds the emulator FROM
    base_image_origin: str  # where that image came from, or what provision will make it from
    checks: list[DoctorCheck]

    @property
    def failed(self) -> list[str]:
        return [c.name for c in self.checks if not c.ok]
