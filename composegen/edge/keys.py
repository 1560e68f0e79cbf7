"""Per-client keys: `keys add/list/revoke/rotate`. A key is shown once, when made; only its sha256 is kept,
in .composegen/edge/keys.json (0600 under 0700 directories, outside git), which the gatekeeper re-reads on
change: adding, rotating or revoking takes effect at once and restarts nothing.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, time
from pathlib import Path
from typing import TypedDict, TypeVar, cast

from composegen.errors import BadInput
from composegen.project import Project
from composegen.stack import driver

CLIENT_RE = re.compile(r"[a-z0-9][a-z0-9_.-]{0,62}")
KEY_PREFIX = "cgk_"
MAX_STATE_BYTES = 4 << 20
Doc = TypeVar("Doc", bound=Mapping[str, object])


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
    return driver.private_dir(project, "edge")


def keys_path(project: Project) -> Path:
    return edge_dir(project) / "keys.json"


def read_json(path: Path, empty: Doc) -> Doc:
    """A state file of ours: a plain file, bounded, a JSON object; BadInput naming it otherwise. It is typed
    as the file's shape (EMPTY's type); its reader checks each field it uses (files from older runs load)."""
    if path.is_symlink():
        raise BadInput(f"{path}: is a symbolic link; composegen never reads state through links")
    if not path.exists():
        return empty
    if not path.is_file() or path.stat().st_size > MAX_STATE_BYTES:
        raise BadInput(f"{path}: not a plain file, or larger than {MAX_STATE_BYTES >> 20} MiB")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadInput(f"{path}:1: unreadable JSON ({type(exc).__name__}); fix or remove it") from None
    if not isinstance(doc, dict):
        raise BadInput(f"{path}:1: must be a JSON object")
    return cast(Doc, doc)


def write_json(path: Path, doc: Mapping[str, object]) -> None:
    driver.private_write(path, json.dumps(doc, indent=1, sort_keys=True) + "\n")


def now_utc() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_expiry(text: str) -> datetime:
    """--expires: a date (the key stops working at 00:00 UTC that day) or an ISO 8601 moment; future only."""
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
            moment = datetime.combine(datetime.fromisoformat(text).date(), time(0), UTC)
        else:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
            moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    except ValueError:
        raise BadInput(f"--expires {text!r}: not a date (YYYY-MM-DD) or ISO 8601 time") from None
    if moment <= now_utc():
        raise BadInput(f"--expires {text}: already in the past")
    return moment


@dataclass(frozen=True)
class Client:
    name: str
    created: str
    expires: str | None
    revoked: str | None

    def state(self, now: datetime) -> str:
        if self.revoked:
            return "revoked"
        if self.expires and datetime.fromisoformat(self.expires.replace("Z", "+00:00")) <= now:
            return "expired"
        return "active"


def _load(project: Project) -> list[ClientRecord]:
    clients = read_json(keys_path(project), KeysFile(clients=[])).get("clients")
    if not isinstance(clients, list) or not all(
        isinstance(c, dict) and isinstance(c.get("name"), str) for c in clients
    ):
        raise BadInput(f"{project.rel(keys_path(project))}: clients: not a list of clients")
    return clients


def _save(project: Project, clients: list[ClientRecord]) -> None:
    write_json(keys_path(project), KeysFile(clients=clients))


def _new_key() -> tuple[str, str]:
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    return key, hashlib.sha256(key.encode("utf-8")).hexdigest()


def _checked_name(name: str) -> str:
    if not CLIENT_RE.fullmatch(name):
        raise BadInput(f"{name!r}: not a client name (lower-case letters, digits, '.', '-', '_', at most 63)")
    return name


def add(project: Project, name: str, expires: str | None = None) -> str:
    """A new client; returns its key (the only time it exists outside the client's hands)."""
    _checked_name(name)
    moment = parse_expiry(expires) if expires else None
    with driver.profile_lock(project, "edge-keys"):
        clients = _load(project)
        if any(c["name"] == name for c in clients):
            raise BadInput(f"client {name!r} exists", hint=f"`composegen keys rotate {name}` gives it a new key")
        key, digest = _new_key()
        clients.append(
            ClientRecord(
                name=name, sha256=digest, created=iso(now_utc()), expires=iso(moment) if moment else None, revoked=None
            )
        )
        _save(project, clients)
    return key


def rotate(project: Project, name: str) -> str:
    """A new key for an existing client; the old one stops working at once."""
    with driver.profile_lock(project, "edge-keys"):
        clients = _load(project)
        client = _find(clients, name)
        key, digest = _new_key()
        client["sha256"], client["created"], client["revoked"] = digest, iso(now_utc()), None
        _save(project, clients)
    return key


def revoke(project: Project, name: str) -> None:
    with driver.profile_lock(project, "edge-keys"):
        clients = _load(project)
        client = _find(clients, name)
        client["revoked"] = iso(now_utc())
        _save(project, clients)


def listing(project: Project) -> list[Client]:
    return [Client(c["name"], str(c.get("created") or ""), c.get("expires"), c.get("revoked")) for c in _load(project)]


def _find(clients: list[ClientRecord], name: str) -> ClientRecord:
    for client in clients:
        if client["name"] == name:
            return client
    known = ", ".join(c["name"] for c in clients) or "none"
    raise BadInput(f"no client {name!r} (clients: {known})", hint=f"`composegen keys add {name}`")


def remove(project: Project, name: str) -> None:
    """Drop a client's record entirely (the exposure gate's throw-away client)."""
    with driver.profile_lock(project, "edge-keys"):
        clients = _load(project)
        _find(clients, name)
        _save(project, [c for c in clients if c["name"] != name])
