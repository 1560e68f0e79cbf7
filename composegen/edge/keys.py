"""Per-client keys (`edge keys …`). A key is shown once, when made; only its sha256
is kept, in .composegen/edge/keys.json (0600 under 0700 directories, outside git), which the
gatekeeper re-reads on change: adding, rotating or revoking takes effect at once and restarts
nothing.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, time
from pathlib import Path
from typing import TypedDict

from composegen import privatestate
from composegen.errors import BadInput
from composegen.project import Project

CLIENT_RE = re.compile(r"[a-z0-9][a-z0-9_.-]{0,62}")
KEY_PREFIX = "cgk_"


class ClientRecord(TypedDict):
    """One client of keys.json, as written (and as the gatekeeper reads it)."""

    name: str
    sha256: str
    created: str
    expires: str | None
    revoked: str | None


class KeysFile(TypedDict):
    clients: list[ClientRecord]


def edge_dir(project: Project) -> Path:
    return privatestate.state_dir(project, "edge")


def keys_path(project: Project) -> Path:
    return edge_dir(project) / "keys.json"


def parse_expiry(text: str) -> datetime:
    """--expires: a date (the key stops at 00:00 UTC that day) or an ISO 8601 time; future only."""
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
            moment = datetime.combine(datetime.fromisoformat(text).date(), time(0), UTC)
        else:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
            moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    except ValueError:
        raise BadInput(f"--expires {text!r}: not a date (YYYY-MM-DD) or ISO 8601 time") from None
    if moment <= privatestate.now():
        raise BadInput(f"--expires {text}: already in the past")
    return moment


@dataclass(frozen=True)
class Client:
    name: str
    created: str
    expires: str | None
    revoked: str | None
    # what is wrong with this record of keys.json (edited by hand), if anything
    problem: str | None = None

    def state(self, now: datetime) -> str:
        if self.problem:
            return "invalid"
        if self.revoked:
            return "revoked"
        expiry = privatestate.parse_stamp(self.expires)
        return "expired" if expiry is not None and expiry <= now else "active"


def _client(record: Mapping[str, object]) -> Client:
    """A keys.json record as `edge keys list` shows it; a wrong-kind field named, not trusted."""
    fields = {key: record.get(key) for key in ("created", "expires", "revoked")}
    problems = [
        f"{key}: {value!r} is not a time"
        for key, value in fields.items()
        if value is not None and (privatestate.parse_stamp(value) is None)
    ]
    shown = {
        key: value if isinstance(value, str) else (None if value is None else repr(value))
        for key, value in fields.items()
    }
    created, expires, revoked = shown["created"] or "", shown["expires"], shown["revoked"]
    return Client(str(record["name"]), created, expires, revoked, "; ".join(problems) or None)


def _load(project: Project) -> list[ClientRecord]:
    clients = privatestate.read_json(keys_path(project), KeysFile(clients=[])).get("clients")
    if not isinstance(clients, list) or not all(
        isinstance(c, dict) and isinstance(c.get("name"), str) for c in clients
    ):
        raise BadInput(f"{project.rel(keys_path(project))}: clients: not a list of clients")
    return clients


def _save(project: Project, clients: list[ClientRecord]) -> None:
    privatestate.write_json(keys_path(project), KeysFile(clients=clients))


def _new_key() -> tuple[str, str]:
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    return key, hashlib.sha256(key.encode("utf-8")).hexdigest()


def _checked_name(name: str) -> str:
    if not CLIENT_RE.fullmatch(name):
        msg = f"{name!r}: not a client name (lower-case letters, digits, '.', '-', '_', at most 63)"
        raise BadInput(msg)
    return name


def add(project: Project, name: str, expires: str | None = None) -> str:
    """A new client; returns its key (the only time it exists outside the client's hands)."""
    _checked_name(name)
    moment = parse_expiry(expires) if expires else None
    with privatestate.profile_lock(project, "edge-keys"):
        clients = _load(project)
        if any(c["name"] == name for c in clients):
            msg = f"client {name!r} exists"
            raise BadInput(msg, hint=f"`composegen edge keys rotate {name}` gives it a new key")
        key, digest = _new_key()
        clients.append(
            ClientRecord(
                name=name,
                sha256=digest,
                created=privatestate.stamp(),
                expires=privatestate.stamp(moment) if moment else None,
                revoked=None,
            )
        )
        _save(project, clients)
    return key


def rotate(project: Project, name: str) -> str:
    """A new key for an existing client; the old one stops working at once."""
    with privatestate.profile_lock(project, "edge-keys"):
        clients = _load(project)
        client = _find(clients, name)
        key, digest = _new_key()
        client["sha256"], client["created"], client["revoked"] = digest, privatestate.stamp(), None
        _save(project, clients)
    return key


def revoke(project: Project, name: str) -> None:
    with privatestate.profile_lock(project, "edge-keys"):
        clients = _load(project)
        client = _find(clients, name)
        client["revoked"] = privatestate.stamp()
        _save(project, clients)


def listing(project: Project) -> list[Client]:
    """Every client of keys.json; a bad record is listed with its problem (its state: invalid)."""
    return [_client(c) for c in _load(project)]


def _find(clients: list[ClientRecord], name: str) -> ClientRecord:
    for client in clients:
        if client["name"] == name:
            return client
    known = ", ".join(c["name"] for c in clients) or "none"
    raise BadInput(
        f"no client {name!r} (clients: {known})", hint=f"`composegen edge keys add {name}`"
    )


def remove(project: Project, name: str) -> None:
    """Drop a client's record entirely (the exposure gate's throw-away client)."""
    with privatestate.profile_lock(project, "edge-keys"):
        clients = _load(project)
        _find(clients, name)
        _save(project, [c for c in clients if c["name"] != name])
