"""Where an engine answers, and Docker's timestamps: the plain-data half of the engine room (no docker import).

A `Target` is a DOCKER_HOST-style URL (unix://, tcp://, ssh://), a docker context name (resolved with
`docker context inspect`), or neither — the default engine (DOCKER_HOST or the local socket).
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from datetime import datetime

from composegen.addresses import url_is_local
from composegen.errors import EngineError


@dataclass(frozen=True)
class Target:
    """Where an engine answers. Both fields None: the default engine."""

    host: str | None = None  # DOCKER_HOST-style URL
    context: str | None = None  # docker context name

    @property
    def label(self) -> str:
        if self.host:
            return self.host
        return f"context {self.context}" if self.context else "the local engine"

    @property
    def is_local(self) -> bool:
        """The engine runs on this machine (same /dev/shm, same loopback): a unix socket, or the
        default engine when DOCKER_HOST does not point elsewhere. A context counts as remote."""
        if self.context:
            return False
        return url_is_local(self.host or os.environ.get("DOCKER_HOST"))

    def url(self) -> str | None:
        return self.host or (context_host(self.context) if self.context else None)


DEFAULT = Target()


def context_host(name: str) -> str:
    """The engine URL a docker context points at (`docker context inspect NAME`)."""
    try:
        proc = subprocess.run(["docker", "context", "inspect", name], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EngineError(f"docker context inspect {name}: {exc}") from None
    if proc.returncode != 0:
        raise EngineError(
            f"docker context {name!r} cannot be read: {proc.stderr.strip()[:300]}",
            hint="`docker context ls` lists the contexts",
        )
    try:
        return str(json.loads(proc.stdout)[0]["Endpoints"]["docker"]["Host"])
    except (ValueError, LookupError, TypeError):
        raise EngineError(f"docker context {name!r} has no docker endpoint") from None


def default_engine() -> tuple[str | None, str]:
    """The engine `docker` itself would use with no -H: (a context's URL for the SDK, or None when the SDK's
    own environment reading finds it; what it came from, said when it cannot be reached). DOCKER_HOST wins
    (with its TLS variables, read by the SDK), then DOCKER_CONTEXT, then the config's current context (the
    SDK alone reads no context)."""
    host = os.environ.get("DOCKER_HOST")
    if host:
        return None, f"{host} (DOCKER_HOST)"
    context = os.environ.get("DOCKER_CONTEXT") or _current_context()
    if context and context != "default":
        where = "DOCKER_CONTEXT" if os.environ.get("DOCKER_CONTEXT") else "docker context use"
        url = context_host(context)
        return url, f"{url} (context {context}, from {where})"
    return None, "unix:///var/run/docker.sock (the default: no DOCKER_HOST or context set)"


def _current_context() -> str | None:
    config = os.path.join(os.environ.get("DOCKER_CONFIG") or os.path.expanduser("~/.docker"), "config.json")
    try:
        with open(config, encoding="utf-8") as stream:
            value = json.loads(stream.read(1 << 20)).get("currentContext")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) and value else None


def docker_time(stamp: str) -> float | None:
    """Epoch seconds of a Docker RFC 3339 timestamp (nanoseconds cut to micro); None for Docker's zero time."""
    if not stamp or stamp.startswith("0001"):
        return None
    return datetime.fromisoformat(stamp[:26].rstrip("Z") + "+00:00").timestamp()
