"""Waiting for a stack: created → running → port open → /health 200 → /v1/models lists the served
name.

HTTP is polled every 0.1 s by us rather than waiting on Docker's healthcheck interval, so readiness
is seen within a poll of /health first answering 200. The container's state is checked alongside, so
an exit or restart fails at once instead of at the timeout."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from composegen.wire import replies
from composegen.wire.http import SMALL_REPLY, Peer, PeerUnreachable, WireError

PHASES = ("created", "running", "port open", "health 200", "models ready")
HTTP_POLL_S = 0.1
STATE_POLL_S = 0.5


@dataclass
class Endpoint:
    host: str
    port: int
    api_key: str | None = None

    def get(self, path: str, timeout: float = 2.0, cap: int = SMALL_REPLY) -> tuple[int, bytes]:
        """(status, body) within `timeout` s in all and `cap` bytes (wire.http), else WireError."""
        reply = self.peer.get(path, deadline_s=timeout, cap=cap)
        return reply.status, reply.body

    @property
    def peer(self) -> Peer:
        auth = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        return Peer(self.host, self.port, auth)

    def port_open(self) -> bool:
        """Something answers HTTP on the port. A TCP connect is not enough: docker-proxy accepts on
        the host port long before the server inside listens, then drops the connection."""
        try:
            self.get("/health", timeout=1.0)
            return True
        except WireError:
            return False

    @property
    def base_url(self) -> str:
        return self.peer.base_url


@dataclass
class Waited:
    phases: dict[str, float] = field(default_factory=dict)  # phase -> seconds since start
    model: replies.ModelEntry | None = None  # the served name's /v1/models entry, once listed
    ready_at: float | None = None  # wall clock (time.time()) when /health first answered 200


class Unauthorized(WireError):
    """The API refuses us (401/403): waiting longer cannot help."""


class StackFailed(Exception):
    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(message)
        self.exit_code = exit_code


def models_entry(endpoint: Endpoint, served_name: str) -> replies.ModelEntry | None:
    """The served name's /v1/models entry; None while nothing answers in time. A listing of the
    wrong shape is a WireError (not an OpenAI-compatible server), not "not ready yet"."""
    try:
        status, body = endpoint.get("/v1/models")
    except PeerUnreachable:
        return None
    if status in (401, 403):
        key = (
            "and refused the one composegen sent"
            if endpoint.api_key
            else "composegen was not given"
        )
        raise Unauthorized(
            f"{endpoint.base_url}/v1/models answered {status}: the server wants an API key {key}",
            hint="set service.environment.VLLM_API_KEY: ${VLLM_API_KEY} in the profile and export VLLM_API_KEY",
        )
    if status != 200:
        return None
    listing = replies.check(replies.ModelsReply, body, f"{endpoint.base_url}/v1/models")
    return next((m for m in listing.data if m.id == served_name), None)


def health_ok(endpoint: Endpoint) -> bool:
    try:
        return endpoint.get("/health", timeout=1.0)[0] == 200
    except WireError:
        return False


def wait_ready(
    state: Callable[[], tuple[str, int | None, int]],
    endpoint: Endpoint,
    served_name: str,
    max_model_len: int | None,
    timeout: float,
    on_phase: Callable[[str, float], None] = lambda phase, t: None,
    on_tick: Callable[[float], None] = lambda t: None,
) -> Waited:
    """`state()` gives (status, exit_code, restart_count); status "" when absent."""
    start = time.monotonic()
    waited = Waited()
    last_state = 0.0
    restarts0: list[int] = []

    def reach(phase: str) -> None:
        if phase not in waited.phases:
            waited.phases[phase] = round(time.monotonic() - start, 3)
            on_phase(phase, waited.phases[phase])

    while True:
        now = time.monotonic()
        if now - start > timeout:
            missing = next(p for p in PHASES if p not in waited.phases)
            raise TimeoutError(f"not ready after {timeout:g} s (waiting for: {missing})")
        if now - last_state >= STATE_POLL_S or "running" not in waited.phases:
            last_state = now
            _container_phase(state(), restarts0, reach)
        api = "running" in waited.phases
        if api and _api_phase(endpoint, served_name, max_model_len, waited, reach):
            return waited
        on_tick(time.monotonic() - start)
        time.sleep(HTTP_POLL_S)


def _container_phase(
    current: tuple[str, int | None, int], restarts0: list[int], reach: Callable[[str], None]
) -> None:
    """Created/running from the container's state; an exit or a restart fails the wait at once."""
    status, exit_code, restarts = current
    if status:
        reach("created")
    if not restarts0:
        restarts0.append(restarts)
    if status in ("exited", "dead"):
        raise StackFailed(
            f"the container exited with code {exit_code} before it was ready", exit_code
        )
    if status == "restarting" or restarts > restarts0[0]:
        raise StackFailed(f"the container is restarting (exit code {exit_code})", exit_code)
    if status == "running":
        reach("running")


def _api_phase(
    endpoint: Endpoint,
    served_name: str,
    max_model_len: int | None,
    waited: Waited,
    reach: Callable[[str], None],
) -> bool:
    """Port open, /health 200, then /v1/models listing the served name; True once ready."""
    if "port open" not in waited.phases and endpoint.port_open():
        reach("port open")
    if "port open" in waited.phases and "health 200" not in waited.phases and health_ok(endpoint):
        waited.ready_at = time.time()
        reach("health 200")
    if "health 200" not in waited.phases:
        return False
    entry = models_entry(endpoint, served_name)
    if entry and max_model_len is not None and entry.max_model_len != max_model_len:
        raise StackFailed(
            f"/v1/models reports max_model_len {entry.max_model_len} for {served_name}, "
            f"the profile says {max_model_len}"
        )
    if entry:
        waited.model = entry
        reach("models ready")
        return True
    return False
