"""`bench NAME --via-edge`: the load benchmark through the edge's public TLS listener, alternated
with the operator door (the figures: evidence/viaedge.py).

NAME must be a stack the edge fronts with an alias pointing at it now (else BadInput, exit 2, naming
why). The edge's requests carry a throw-away client key made here, as the exposure gate makes its own
(keys.add: only its sha256 is written); its record is removed afterwards whatever happens — an
error, Ctrl-C, or a SIGTERM, which this module turns into an unwinding exit for the run's length.
The key itself is never printed, written or put in a result.
"""

from __future__ import annotations

import contextlib
import dataclasses
import secrets
import signal
import ssl
import threading
from collections.abc import Iterable, Iterator

from composegen.bench import viaedge
from composegen.bench.reports import BenchResult
from composegen.bench.spec import BenchSpec
from composegen.edge import keys, routes, service
from composegen.edge.config import Edge
from composegen.errors import BadInput
from composegen.profiles.resolved import Resolved
from composegen.project import Project
from composegen.stack import driver

CLIENT = "bench-via-edge"


def alias_for(project: Project, edge: Edge, name: str) -> str:
    """The alias the edge's requests ask for: one pointing at NAME now (BadInput when none does)."""
    if name not in edge.stacks:
        raise BadInput(
            f"bench --via-edge: {name} is not behind the edge "
            f"({edge.path} stacks: {', '.join(edge.stacks) or 'none'})"
        )
    current = routes.aliases(project, edge)
    found = sorted(alias for alias, profile in current.items() if profile == name)
    if not found:
        pointing = ", ".join(f"{a} -> {p}" for a, p in current.items()) or "none"
        raise BadInput(
            f"bench --via-edge: no alias of the edge points at {name} (aliases: {pointing}); the "
            "edge routes requests by alias",
            hint=f"`composegen promote ALIAS {name}` points one at it",
        )
    return found[0]


def _tls(project: Project, edge: Edge) -> tuple[ssl.SSLContext | None, str]:
    """How the listener is verified: the edge's own root (tls internal), else the system's roots."""
    if edge.scheme == "http":
        return None, "off (edge.yaml tls.mode off: plain HTTP)"
    if edge.config.tls.mode != "internal":
        return ssl.create_default_context(), "verified with the system's roots"
    context = ssl.create_default_context(cadata=service.root_certificate(project))
    return context, "verified with the edge's internal CA"


@contextlib.contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    """A SIGTERM raises SystemExit (143) instead of ending the process on the spot, so `finally`
    blocks run (the key's removal)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _remove(project: Project, client: str) -> None:
    """keys.remove, not to be cut short by a second Ctrl-C."""
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    try:
        # a signal may have landed inside keys.add, before or after it wrote the record
        if any(c.name == client for c in keys.listing(project)):
            keys.remove(project, client)
    finally:
        if main:
            signal.signal(signal.SIGINT, previous)


def bench_via_edge(
    project: Project, r: Resolved, levels: Iterable[int], options: BenchSpec
) -> BenchResult:
    """viaedge.run_via_edge against NAME's door and the edge in front of it (whether the stack
    is emulated, from its running container)."""
    edge = service.load(project)
    alias = alias_for(project, edge, r.name)
    emulated = driver.live_identity(driver.running_container(project, r)).emulated
    ep = driver.endpoint(r)
    door = viaedge.Way(ep.base_url, r.profile.model.served_name, ep.api_key)
    context, tls = _tls(project, edge)
    client = f"{CLIENT}-{secrets.token_hex(4)}"
    with _sigterm_unwinds():
        try:
            key = keys.add(project, client)
            way = viaedge.EdgeWay(edge.url, alias, key, context, name=edge.config.name, tls=tls)
            options = dataclasses.replace(options, emulated=emulated)
            return viaedge.run_via_edge(door, way, levels, options)
        finally:
            _remove(project, client)
