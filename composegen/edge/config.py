"""edge.yaml at the project top: the edge's listeners, TLS mode, the stacks behind it, aliases,
images.

Validated like a profile: unknown keys, wrong types and cross-field problems are one
`edge.yaml:LINE: field: problem` line (BadInput). Nothing here can reach outside the project: images
are pinned by digest, names are one path component of a fixed grammar, TLS off is refused unless the
listener is loopback.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from composegen.addresses import is_loopback
from composegen.edge import image
from composegen.errors import BadInput
from composegen.profiles import resolve
from composegen.profiles.resolved import Resolved
from composegen.profiles.yamlio import Marked, load_marked
from composegen.project import Project

EDGE_FILE = "edge.yaml"
NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,30}")
ALIAS_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
PINNED_RE = re.compile(r"[a-z0-9][a-z0-9._/:-]*@sha256:[0-9a-f]{64}")
EMAIL_RE = re.compile(r"[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9.-]{1,253}\.[A-Za-z]{2,63}")
DNS_RE = re.compile(r"(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)


class Listen(_Strict):
    bind: str = "127.0.0.1"
    port: int = Field(default=39443, ge=1, le=65535)

    @field_validator("bind")
    @classmethod
    def _ip_literal(cls, bind: str) -> str:
        """Docker publishes on an address, not a name: `localhost` would fail only at `edge up`."""
        try:
            return str(ipaddress.ip_address(bind))
        except ValueError:
            msg = f"{bind!r} is not an IP address (127.0.0.1, 0.0.0.0, ::1, a LAN address)"
            raise ValueError(msg) from None


class Tls(_Strict):
    mode: Literal["internal", "acme", "off"] = "internal"
    names: list[str] = Field(
        default_factory=lambda: ["localhost", "127.0.0.1"], min_length=1, max_length=16
    )
    email: str | None = None

    @field_validator("mode", mode="before")
    @classmethod
    def _yaml_off(cls, mode: object) -> object:
        return "off" if mode is False else mode  # YAML 1.1 reads a bare `off` as false

    @field_validator("names")
    @classmethod
    def _names(cls, names: list[str]) -> list[str]:
        for name in names:
            if not re.fullmatch(r"[A-Za-z0-9.:-]{1,253}", name):
                raise ValueError(f"{name!r} is not a host name or IP address")
        return names


class Metrics(_Strict):
    port: int = Field(default=39490, ge=1, le=65535)  # always on 127.0.0.1


class Images(_Strict):
    proxy: str = (
        "docker.io/library/caddy:2.6.2-alpine"
        "@sha256:7992b931b7da3cf0840dd69ea74b2c67d423faf03408da8abdc31b7590a239a7"
    )
    gate: str = (
        "docker.io/library/python:3.12-slim"
        "@sha256:78387bc3881b8273120a12ebe6c1ab22b018ccc2c9adf565ae1ac9b536e184ea"
    )

    @field_validator("proxy", "gate")
    @classmethod
    def _pinned(cls, ref: str) -> str:
        if not (PINNED_RE.fullmatch(ref) or image.is_local(ref)):
            msg = f"{ref!r} is not pinned: NAME@sha256:<64 hex>, or {image.LOCAL_REPO}:<16 hex> (composegen docs edge)"
            raise ValueError(msg)
        return ref


class EdgeConfig(_Strict):
    name: str = "edge"
    listen: Listen = Field(default_factory=lambda: Listen())
    tls: Tls = Field(default_factory=lambda: Tls())
    metrics: Metrics = Field(default_factory=lambda: Metrics())
    stacks: list[str] = Field(min_length=1, max_length=64)
    aliases: dict[str, str] = Field(default_factory=dict)
    images: Images = Field(default_factory=lambda: Images())
    # seconds a client is told to wait during a switch
    retry_after: int = Field(default=30, ge=1, le=3600)

    @field_validator("name")
    @classmethod
    def _name(cls, name: str) -> str:
        if not NAME_RE.fullmatch(name):
            raise ValueError(f"{name!r}: lower-case letters, digits, '-' and '_', at most 31")
        return name


@dataclass(frozen=True)
class Edge:
    """A validated edge.yaml with the profiles behind it, resolved."""

    config: EdgeConfig
    stacks: dict[str, Resolved]  # profile name -> resolved profile, in edge.yaml order
    path: str  # edge.yaml as users see it
    prefix: str = "composegen"  # of its compose project and network: composegen.yaml's scope.name

    @property
    def project_name(self) -> str:
        return f"{self.prefix}-{self.config.name}"

    @property
    def network(self) -> str:
        return f"{self.prefix}-{self.config.name}-net"

    @property
    def scheme(self) -> str:
        return "http" if self.config.tls.mode == "off" else "https"

    @property
    def url(self) -> str:
        host = (
            self.config.listen.bind
            if is_loopback(self.config.listen.bind)
            else self.config.tls.names[0]
        )
        host = "127.0.0.1" if host in ("0.0.0.0", "") else host
        host = f"[{host}]" if ":" in host else host
        return f"{self.scheme}://{host}:{self.config.listen.port}"


def upstream_host(name: str) -> str:
    """The name a stack answers to on the edge's network (a network alias set by its override)."""
    return f"stack-{name}"


def edge_path(project: Project) -> Path:
    return project.root / EDGE_FILE


def configured(project: Project) -> bool:
    return edge_path(project).is_file()


def load(project: Project) -> Edge:
    path = edge_path(project)
    if path.is_symlink():
        msg = f"{EDGE_FILE}: is a symbolic link; the edge's configuration must be a plain file"
        raise BadInput(msg)
    marked = load_marked(path, EDGE_FILE)
    if not isinstance(marked.data, dict):
        raise BadInput(f"{EDGE_FILE}:1: the edge configuration must be a mapping")
    try:
        config = EdgeConfig.model_validate(marked.data)
    except ValidationError as exc:
        raise _schema_error(exc, marked) from None
    if sc := resolve.scope(project):  # its doors, moved by the project's scope
        config.listen.port = sc.port(config.listen.port, f"{EDGE_FILE}'s listen.port")
        config.metrics.port = sc.port(config.metrics.port, f"{EDGE_FILE}'s metrics.port")
    return _checked(project, config, marked)


def _where(marked: Marked, *path: str | int) -> str:
    mark = marked.where(tuple(path))
    return f"{mark[0]}:{mark[1]}" if mark else EDGE_FILE


SCHEMA_WORDS = {"extra_forbidden": "unknown key", "missing": "required key is missing"}


def _schema_error(exc: ValidationError, marked: Marked) -> BadInput:
    err = exc.errors()[0]
    loc = tuple(
        p
        for p in err["loc"]
        if not (isinstance(p, str) and p.startswith(("literal", "constrained")))
    )
    msg = SCHEMA_WORDS.get(err["type"], err["msg"].removeprefix("Value error, "))
    return BadInput(f"{_where(marked, *loc)}: {'.'.join(map(str, loc))}: {msg}")


def _check_acme(config: EdgeConfig, marked: Marked) -> None:
    """What ACME needs: public DNS names, an account email, a listener it reaches (TLS-ALPN-01)."""
    tls = config.tls
    has_names = "names" in (marked.data.get("tls") or {})
    names_at = _where(marked, "tls", "names") if has_names else _where(marked, "tls")
    bad = [n for n in tls.names if not DNS_RE.fullmatch(n)]
    if bad:
        msg = f"{names_at}: tls.names: acme needs public DNS names, got {bad[0]!r}"
        raise BadInput(msg, hint="the name the certificate is for, e.g. names: [llm.example.org]")
    if tls.email is None:
        msg = f"{_where(marked, 'tls')}: tls.email: acme needs the account's email (the CA's expiry notices go there)"
        raise BadInput(msg)
    if not EMAIL_RE.fullmatch(tls.email):
        msg = f"{_where(marked, 'tls', 'email')}: tls.email: {tls.email!r} is not an email address"
        raise BadInput(msg)
    if is_loopback(config.listen.bind):
        raise BadInput(
            f"{_where(marked, 'listen', 'bind') if 'listen' in marked.data else _where(marked, 'tls')}: listen.bind: "
            f"{config.listen.bind} is loopback; the ACME CA must reach the listener on port 443 of {tls.names[0]}",
            hint="bind 0.0.0.0 (and forward port 443 to listen.port), or use tls internal / off behind tailscale",
        )


def _checked(project: Project, config: EdgeConfig, marked: Marked) -> Edge:
    tls, listen = config.tls, config.listen
    if tls.mode == "off" and not is_loopback(listen.bind):
        raise BadInput(
            f"{_where(marked, 'tls', 'mode')}: tls.mode: off is only allowed on a loopback listener "
            f"(listen.bind is {listen.bind!r})",
            hint="keep tls internal, or bind 127.0.0.1 and put `tailscale serve` in front (composegen docs edge)",
        )
    if tls.mode == "acme":
        _check_acme(config, marked)
    if "edge" in project.profile_names():
        raise BadInput(
            f"{EDGE_FILE}:1: profiles/edge.yaml: out/edge/ belongs to the edge; rename that profile"
        )
    if listen.port == config.metrics.port:
        msg = f"{_where(marked, 'metrics', 'port')}: metrics.port: the same port as listen.port"
        raise BadInput(msg)
    stacks = _checked_stacks(project, config, marked)
    _check_aliases(config, marked, stacks)
    return Edge(config, stacks, EDGE_FILE, resolve.prefix(project))


def _checked_stacks(project: Project, config: EdgeConfig, marked: Marked) -> dict[str, Resolved]:
    """The stacks the edge fronts: each listed once, a single-node profile, on a port of its own."""
    stacks: dict[str, Resolved] = {}
    ports: dict[int, str] = {config.listen.port: "listen.port", config.metrics.port: "metrics.port"}
    for i, name in enumerate(config.stacks):
        at = f"{_where(marked, 'stacks', i)}: stacks[{i}]"
        if name in stacks:
            raise BadInput(f"{at}: {name!r} is listed twice")
        if name not in project.profile_names():
            raise BadInput(f"{at}: no profile {name!r} in profiles/")
        r = resolve.load(project, name)
        if r.profile.nodes is not None:
            msg = f"{at}: {name} is multi-node (host network); the edge fronts single-node stacks only"
            raise BadInput(msg)
        port = r.profile.service.port.host
        if port in ports:
            raise BadInput(f"{at}: {name}'s host port {port} is also {ports[port]}")
        ports[port] = f"{name}'s host port"
        stacks[name] = r
    return stacks


def _check_aliases(config: EdgeConfig, marked: Marked, stacks: dict[str, Resolved]) -> None:
    for alias, target in config.aliases.items():
        if not ALIAS_RE.fullmatch(alias):
            msg = f"{_where(marked, 'aliases', alias)}: aliases: {alias!r} is not a model name"
            raise BadInput(msg)
        if target not in stacks:
            msg = f"{_where(marked, 'aliases', alias)}: aliases.{alias}: {target!r} is not one of the edge's stacks"
            raise BadInput(msg)
