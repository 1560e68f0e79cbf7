"""Where an engine answers, and Docker's timestamps: the plain-data half of the engine room (no
docker import, no `docker` command: a context's URL is read by engine.target_url).

A `Target` is a DOCKER_HOST-style URL (unix://, tcp://, ssh://), a docker context name, or neither —
the default engine (DOCKER_HOST or the local socket)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime

from composegen.addresses import url_is_local


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


DEFAULT = Target()


def docker_time(stamp: str) -> float | None:
    """Epoch seconds of a Docker RFC 3339 stamp (ns cut to µs); None for Docker's zero time."""
    if not stamp or stamp.startswith("0001"):
        return None
    return datetime.fromisoformat(stamp[:26].rstrip("Z") + "+00:00").timestamp()
