"""What the engine says, as plain frozen values: `ContainerFacts` (with its `NetworkAddress`es),
`NetworkFacts`, `ImageFacts`, built from the engine API's inspect/list answers (dicts) here, so no
SDK object leaves stack/engine.py and nothing here needs docker. Also the reading of
`docker logs --timestamps` lines."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, overload

from composegen.stack.targets import DEFAULT, Target, docker_time


class _Label:
    """A read-only attribute holding one label's value (None when the object lacks that label)."""

    def __init__(self, key: str) -> None:
        self.key = key

    @overload
    def __get__(self, obj: None, owner: type) -> _Label: ...

    @overload
    def __get__(self, obj: ContainerFacts | NetworkFacts, owner: type) -> str | None: ...

    def __get__(
        self, obj: ContainerFacts | NetworkFacts | None, owner: type
    ) -> _Label | str | None:
        return self if obj is None else obj.labels.get(self.key)


@dataclass(frozen=True)
class NetworkAddress:
    """A container's place on one network: its IPv4 address and that network's gateway (on a local
    engine's bridge, this host's own address there)."""

    network: str
    address: str
    gateway: str  # "" when the engine names none (a network without a gateway)


@dataclass(frozen=True)
class ContainerFacts:
    """What the engine says about one container at one moment (`docker inspect`, typed)."""

    id: str
    name: str
    state: str  # created | running | restarting | paused | exited | dead | removing
    running: bool
    health: str | None
    restarts: int
    exit_code: int | None
    started_at: float | None  # epoch seconds; None before the first start
    labels: Mapping[str, str]
    image_id: str
    networks: tuple[str, ...]
    host_port: int | None  # the first published host port (none on the host network)
    target: Target = DEFAULT
    # where it sits on each network that gave it an IPv4 address: the stack's private network, which
    # a local engine's host reaches directly (stack/sleepmode.py: the dev routes without an exec)
    addresses: tuple[NetworkAddress, ...] = ()

    profile = _Label("io.composegen.profile")
    profile_hash = _Label("io.composegen.hash")
    served_name = _Label("io.composegen.served-name")
    node = _Label("io.composegen.node")
    service = _Label("com.docker.compose.service")
    project = _Label("com.docker.compose.project")

    @property
    def emulated(self) -> bool:
        return self.labels.get("io.composegen.emulated") == "true"


@dataclass(frozen=True)
class NetworkFacts:
    id: str
    name: str
    labels: Mapping[str, str]
    target: Target = DEFAULT

    project = _Label("com.docker.compose.project")


@dataclass(frozen=True)
class ImageFacts:
    id: str
    tags: tuple[str, ...]
    repo_digests: tuple[str, ...]
    labels: tuple[tuple[str, str], ...] = ()  # sorted (key, value) pairs of Config.Labels


def parse_container(a: Mapping[str, Any], target: Target) -> ContainerFacts:
    """From the engine's container inspect answer."""
    state = a.get("State") or {}
    net = a.get("NetworkSettings") or {}
    nets = net.get("Networks") or {}
    bindings = [b for bs in (net.get("Ports") or {}).values() for b in bs or []]
    port = next((int(b["HostPort"]) for b in bindings if b.get("HostPort")), None)
    return ContainerFacts(
        id=a["Id"],
        name=a.get("Name", "").lstrip("/"),
        state=state.get("Status", ""),
        running=bool(state.get("Running")),
        health=(state.get("Health") or {}).get("Status"),
        restarts=int(a.get("RestartCount") or 0),
        exit_code=state.get("ExitCode"),
        started_at=docker_time(state.get("StartedAt", "")),
        labels=dict((a.get("Config") or {}).get("Labels") or {}),
        image_id=a.get("Image", ""),
        networks=tuple(sorted(nets)),
        host_port=port,
        target=target,
        addresses=_addresses(nets),
    )


def _addresses(nets: dict[str, Any]) -> tuple[NetworkAddress, ...]:
    """Each network's address and gateway, paired; a network that gave no IPv4 address is left
    out (the host network, one not yet connected)."""
    return tuple(
        NetworkAddress(name, n["IPAddress"], n.get("Gateway") or "")
        for name, n in sorted(nets.items())
        if (n or {}).get("IPAddress")
    )


def parse_network(row: dict[str, Any], target: Target) -> NetworkFacts:
    """From one row of the engine's network listing."""
    return NetworkFacts(row["Id"], row["Name"], dict(row.get("Labels") or {}), target)


def parse_image(a: dict[str, Any]) -> ImageFacts:
    """From the engine's image inspect answer."""
    labels = ((a.get("Config") or {}).get("Labels") or {}).items()
    digests = tuple(sorted(a.get("RepoDigests") or ()))
    pairs = tuple(sorted((str(k), str(v)) for k, v in labels))
    return ImageFacts(a["Id"], tuple(a.get("RepoTags") or ()), digests, pairs)


def stamped_line(line: str) -> tuple[float | None, str]:
    """One `docker logs --timestamps` line as (epoch seconds, text); (None, line) unstamped."""
    stamp, _, text = line.partition(" ")
    try:
        return docker_time(stamp), text.rstrip("\r")
    except ValueError:
        return None, line


def stamped_chunks(stream: Iterator[bytes]) -> Iterator[tuple[float | None, str]]:
    """A followed log's byte chunks (cut anywhere) as stamped lines."""
    pending = b""
    for chunk in stream:
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for line in complete:
            yield stamped_line(line.decode("utf-8", "replace"))
    if pending:
        yield stamped_line(pending.decode("utf-8", "replace"))
