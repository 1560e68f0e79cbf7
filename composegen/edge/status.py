"""What `status` (and `edge status`) shows of the edge: where it listens, TLS mode, its containers,
each alias → profile (and a switch in progress), the clients (names and expiry, never keys)."""

from __future__ import annotations

from typing import TypeVar

from pydantic import TypeAdapter, ValidationError

from composegen import privatestate
from composegen.edge import journal, keys, routes, service
from composegen.edge.reports import AliasRow, EdgeStatusReport, client_rows
from composegen.project import Project
from composegen.stack import driver
from composegen.stack.reports import AliasTarget

T = TypeVar("T")


def edge_status(project: Project) -> EdgeStatusReport:
    edge = service.load(project)
    empty = routes.RoutesFile(retry_after=0, aliases={})  # only its aliases are read
    stale = journal.interrupted(project)
    # tell the clients too: their 503 stage says what happened and what fixes it
    if stale is not None:
        routes.publish(
            project,
            edge,
            {stale["alias"]: {"to": stale["target"], "stage": journal.interrupted_stage(stale)}},
        )
    published = privatestate.read_json(routes.routes_path(project), empty).get("aliases") or {}
    rows = []
    for alias, profile in routes.aliases(project, edge).items():
        live = published.get(alias) if isinstance(published, dict) else None
        switch = live.get("switch") if isinstance(live, dict) else None
        history = routes.history(project, edge, alias)
        rows.append(
            AliasRow(
                alias=alias,
                profile=profile,
                switching=_read(SWITCHING, switch),
                evidence=_read(PROOF, history[-1].get("evidence")) if history else None,
                interrupted=stale is not None and stale["alias"] == alias,
                target=_health(project, profile),
            )
        )
    containers = {svc: c.state for svc, c in service.containers(edge, project).items()}
    return EdgeStatusReport(
        name=edge.config.name,
        url=edge.url,
        tls=edge.config.tls.mode,
        containers=containers,
        stacks=list(edge.stacks),
        aliases=rows,
        clients=client_rows(keys.listing(project)),
    )


# the state files are ours, but a hand-edited entry that does not fit shows as none, not a crash
SWITCHING, PROOF = TypeAdapter(routes.Switching), TypeAdapter(routes.Proof)


def _read(shape: TypeAdapter[T], value: object) -> T | None:
    try:
        return shape.validate_python(value) if value else None
    except ValidationError:
        return None


def alias_targets(report: EdgeStatusReport) -> list[AliasTarget]:
    """The aliases as `status --json` carries them: each one's stack and that stack's health."""
    return [AliasTarget(alias=r.alias, profile=r.profile, target=r.target) for r in report.aliases]


def _health(project: Project, profile: str | None) -> str | None:
    """ready, asleep, starting or down: what the alias's stack does (clients of a down one: 503)."""
    if profile is None:
        return None
    stacks = driver.status(project, profile).stacks
    ep = stacks[0].endpoint if stacks else None
    running = bool(stacks) and any(c.state == "running" for c in stacks[0].containers)
    if ep is None or not running:
        return "down"
    return "asleep" if ep.sleeping else "ready" if ep.ready else "starting"


def format_text(report: EdgeStatusReport) -> str:
    state = ", ".join(f"{k} {v}" for k, v in sorted(report.containers.items())) or "not running"
    lines = [f"edge {report.name}: {report.url} (tls {report.tls}) — {state}"]
    for row in report.aliases:
        doing = ""
        if row.switching:
            said = "INTERRUPTED" if row.interrupted else f"switching to {row.switching['to']}"
            doing = f"  [{said}: {row.switching['stage']}]"
        # said even when ready: a stack downed by hand leaves its alias pointing at it
        health = f" ({row.target})" if row.target else ""
        lines.append(f"  alias {row.alias} → {row.profile or 'nothing'}{health}{doing}")
    active = [c for c in report.clients if c.state == "active"]
    others = len(report.clients) - len(active)
    shown = (
        ", ".join(f"{c.name}{f' (until {c.expires})' if c.expires else ''}" for c in active)
        or "none"
    )
    lines.append(f"  clients: {shown}" + (f"; {others} revoked or expired" if others else ""))
    return "\n".join(lines)
