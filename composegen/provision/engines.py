"""Which engine the caller's environment names: DOCKER_HOST, else DOCKER_CONTEXT, else the local
socket."""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_SOCKET = "/var/run/docker.sock"


def engine_source() -> str:
    """The engine composegen talks to, as the user would set it: `DOCKER_HOST=…`,
    `DOCKER_CONTEXT=…`, or the default socket."""
    if os.environ.get("DOCKER_HOST"):
        return f"DOCKER_HOST={os.environ['DOCKER_HOST']}"
    if os.environ.get("DOCKER_CONTEXT"):
        return f"DOCKER_CONTEXT={os.environ['DOCKER_CONTEXT']}"
    return f"unix://{DEFAULT_SOCKET}, no DOCKER_HOST set"


def compose_label(version: str) -> str:
    """`Docker Compose version v2.40.3` (what `docker compose version` prints) as `v2.40.3`."""
    return version.removeprefix("Docker Compose version ").strip()


def compose_plugin_dir() -> Path:
    """Where the docker CLI looks for a user's plugins: $DOCKER_CONFIG/cli-plugins (default
    ~/.docker)."""
    return Path(os.environ.get("DOCKER_CONFIG") or Path.home() / ".docker") / "cli-plugins"


def local_socket() -> str:
    host = os.environ.get("DOCKER_HOST") or ""
    return host.removeprefix("unix://") if host.startswith("unix://") else DEFAULT_SOCKET


def can_start_locally() -> bool:
    """Only this machine's default engine is ours to start: another socket, a tcp:// or ssh:// host
    or a context belongs to whoever runs it."""
    if os.environ.get("DOCKER_CONTEXT", "default") != "default":
        return False
    host = os.environ.get("DOCKER_HOST")
    return not host or (
        host.startswith("unix://") and local_socket() in (DEFAULT_SOCKET, "/run/docker.sock")
    )
