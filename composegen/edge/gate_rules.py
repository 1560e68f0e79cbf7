"""The gatekeeper's rules (a part of gatekeeper.py; stdlib only): its bounds, the state files, who a key
belongs to, when a route is ready, and what clients read when it is not."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TypedDict, TypeGuard

MAX_BODY = 16 << 20
MAX_BUFFERED = 128 << 20  # request bodies held at once, all clients together
BODY_TIMEOUT_S = 30.0  # the whole body, however slowly it trickles
IDLE_TIMEOUT_S = 120.0  # a kept-alive connection with no request (longer than the proxy's)
UPSTREAM_TIMEOUT_S = 900.0
# Docker's DNS names a running stack within milliseconds; for a removed one it asks servers an
# internal network cannot reach (5 s x 2 tries) before it fails. Past this wait the stack is down.
RESOLVE_WAIT_S = 0.5
RESOLVE_WAIT_DOWN_S = 0.25  # once found down: a stack that came back answers within it (Docker DNS under load: >50 ms)
LOOKUPS = 16  # name lookups in flight at once; past it, a stack being looked up is down
CONNECT_TIMEOUT_S = 3.0
MAX_CONNECTIONS = 512
# a standby engine that has not answered by then is asked whether it sleeps (a real vLLM 0.26.0
# asleep gave a chat request no answer within 8 s); the question itself gets SLEEP_PROBE_S
STANDBY_CHECK_S = 1.0
SLEEP_PROBE_S = 1.0
WATCH_S = 0.1  # how often hung-up clients and overdue bodies are looked for
IDLE_UPSTREAMS = 32  # kept-alive connections per stack
MAX_CHUNK_LINE = 1024
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade"}
HOP_BY_HOP |= {"proxy-authorization"}
MODEL_POSTS = ("/v1/chat/completions", "/v1/completions", "/v1/responses")
# The state files stay plain JSON objects (stdlib only): every field is checked where it is read.
JsonDoc = dict[str, object]


class ModelEntry(TypedDict):
    id: str
    object: str
    owned_by: str


class ModelList(TypedDict):
    """GET /v1/models as the OpenAI API answers it: the edge's aliases."""

    object: str
    data: list[ModelEntry]


class Refused(Exception):
    """A request answered with an error of ours: status, message, OpenAI error type, headers."""

    def __init__(
        self, status: int, message: str, kind: str, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.kind = status, message, kind
        self.headers = dict(headers or {})


class StateFile:
    """A JSON file re-read whenever its (mtime, size, inode) changes; else the last good copy."""

    def __init__(self, path: str, empty: JsonDoc) -> None:
        self.path, self.empty = path, empty
        self._sig: tuple[int, int, int] | None = None
        self._doc: JsonDoc = empty
        self._lock = threading.Lock()

    def get(self) -> JsonDoc:
        try:
            st = os.stat(self.path)
            sig = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            return self.empty
        with self._lock:
            if sig != self._sig:
                try:
                    with open(self.path, encoding="utf-8") as fh:
                        doc = json.load(fh)
                    self._doc = doc if isinstance(doc, dict) else self.empty
                except (OSError, ValueError, RecursionError):
                    self._doc = self.empty  # a broken file lets nobody in, rather than everybody
                self._sig = sig
            return self._doc


def _stamp(text: object) -> datetime | None:
    """A time with a zone from a state file (`…Z`), else None."""
    if not isinstance(text, str) or len(text) > 64:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def _in_future(expires: object, now: datetime) -> bool:
    moment = _stamp(expires)
    return moment is not None and moment > now


def client_for(keys: JsonDoc, authorization: str | None, now: datetime) -> str | None:
    """The client name a bearer key belongs to (valid, not revoked, not expired), else None."""
    if not authorization or not authorization.startswith("Bearer "):
        return None
    digest = hashlib.sha256(authorization[7:].strip().encode("utf-8", "replace")).hexdigest()
    clients = keys.get("clients")
    for client in clients if isinstance(clients, list) else []:
        if not isinstance(client, dict) or client.get("sha256") != digest or client.get("revoked"):
            continue
        expires = client.get("expires")
        if expires is not None and not _in_future(expires, now):
            # expired, or an expiry that is not a time with a zone: refused, never forever
            return None
        name = client.get("name")
        return name if isinstance(name, str) else None
    return None


def _error_doc(status: int, message: str, kind: str) -> dict[str, dict[str, object]]:
    return {"error": {"message": message, "type": kind, "param": None, "code": status}}


def utc(moment: datetime) -> str:
    """composegen's stamp in UTC, for a person (the gate cannot import privatestate's one format)."""
    return moment.astimezone(UTC).isoformat(" ", "seconds").removesuffix("+00:00") + " UTC"


def stage_of(alias: str, route: Mapping[str, object]) -> str:
    """What clients are told about a route that does not serve: a switch's stage, or the engine
    asleep (`asleep_since`, written by whatever put it to sleep), in composegen's words."""
    found = route.get("switch")
    switch: Mapping[str, object] = found if isinstance(found, dict) else {}
    if switch.get("stage"):
        return str(switch["stage"])[:200]
    if route.get("asleep_since"):
        return asleep_stage(alias, str(route.get("profile")), _stamp(route["asleep_since"]))
    return "no stack assigned"


def asleep_stage(alias: str, profile: str, since: datetime | None) -> str:
    when = f" since {utc(since)}" if since else ""
    return f"{alias}'s engine {profile[:80]} is asleep{when}; `composegen wake {profile[:80]}`"


def _ready(route: object) -> TypeGuard[Mapping[str, object]]:
    return (
        isinstance(route, dict)
        and not route.get("switch")
        and not route.get("asleep_since")
        and isinstance(route.get("upstream"), str)
        and isinstance(route.get("served_name"), str)
    )


def models_list(aliases: Mapping[str, object]) -> ModelList:
    data = [ModelEntry(id=a, object="model", owned_by="composegen-edge") for a in sorted(aliases)]
    return ModelList(object="list", data=data)
