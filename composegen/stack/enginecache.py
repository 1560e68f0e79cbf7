"""What an engine cannot change without a restart or a reconfiguration, kept per engine so that `up`
asks only the first time: the rlimit ceiling its containers get (a probe container, ~0.5 s) and the
compose plugin's version (a `docker compose version`, ~0.15 s).

An engine is known by its ID plus what a reconfiguration shows in `docker info` (version, kernel,
cgroup version, runtimes, security options); a record is believed for TTL_S at most. A `compose up`
refused on a rlimit drops the engine's record (up.py), so the next `up` probes again. The compose
record is keyed by the docker CLI and plugin binaries themselves (path, size, mtime)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from composegen import usercache
from composegen.stack import compose, engine, hostprobe
from composegen.stack.targets import Target

TTL_S = 86400
RLIMITS = "engine-rlimits"
COMPOSE = "compose-version"
_PLUGIN_DIRS = (
    "/usr/local/lib/docker/cli-plugins",
    "/usr/local/libexec/docker/cli-plugins",
    "/usr/lib/docker/cli-plugins",
    "/usr/libexec/docker/cli-plugins",
)


def engine_key(info: dict[str, Any]) -> str:
    seen = {
        k: info.get(k)
        for k in (
            "ID",
            "ServerVersion",
            "KernelVersion",
            "CgroupVersion",
            "CgroupDriver",
            "SecurityOptions",
        )
    }
    seen["Runtimes"] = sorted(info.get("Runtimes") or {})
    return hashlib.sha256(json.dumps(seen, sort_keys=True, default=str).encode()).hexdigest()[:32]


def _fresh(record: Mapping[str, object] | None) -> bool:
    at = record.get("at") if record else None
    return isinstance(at, (int, float)) and 0 <= time.time() - at < TTL_S


def rlimits(image: str, owner: str, target: Target | None = None) -> dict[str, int]:
    """The hard rlimits this engine gives a container (-1 = unlimited), from the record if fresh."""
    key = engine_key(engine.engine_info(target))
    record = usercache.read(RLIMITS, key)
    if _fresh(record) and record is not None:
        value = record.get("rlimits")
        if isinstance(value, dict) and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value.values()
        ):
            return {str(k): v for k, v in value.items()}
    ceiling = hostprobe.engine_rlimits(image, owner, target)
    usercache.write(RLIMITS, key, {"at": time.time(), "rlimits": ceiling})
    return ceiling


def forget_rlimits(target: Target | None = None) -> None:
    """After the engine refused a rlimit the record allowed: probe again next time."""
    try:
        usercache.forget(RLIMITS, engine_key(engine.engine_info(target)))
    except Exception:  # best effort: the failure being reported matters more
        return


def _compose_binaries() -> list[Path]:
    """The docker CLI and the first compose plugin it finds (DOCKER_CONFIG, ~/.docker, system)."""
    found = [Path(p) for p in [shutil.which("docker")] if p]
    config = os.environ.get("DOCKER_CONFIG") or os.path.join(os.path.expanduser("~"), ".docker")
    for directory in (os.path.join(config, "cli-plugins"), *_PLUGIN_DIRS):
        candidate = Path(directory) / "docker-compose"
        if candidate.is_file():
            return [*found, candidate]
    return []


def compose_version() -> str:
    binaries = _compose_binaries()
    try:
        stats = [(str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in binaries]
    except OSError:
        stats = []
    key = hashlib.sha256(json.dumps(stats).encode()).hexdigest()[:32] if len(stats) == 2 else None
    record = usercache.read(COMPOSE, key) if key else None
    if _fresh(record) and record is not None and isinstance(record.get("compose"), str):
        return str(record["compose"])
    version = compose.compose_version()
    if key:
        usercache.write(COMPOSE, key, {"at": time.time(), "compose": version})
    return version
