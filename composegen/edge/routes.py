"""Which stack each alias points at, and what the gatekeeper is told.

.composegen/edge/assignments.json: per alias, the history of assignments, newest last:
    {"aliases": {ALIAS: [{"profile", "at", "by" ("edge.yaml" | "promote" | "rollback"), "evidence"
                           ({"kind": "qualify" | "campaign", "ref", "sha256"} | null)}]}}
With no history an alias points where edge.yaml says. .composegen/edge/routes.json is what the gatekeeper
reads: {"retry_after", "aliases": {ALIAS: {"profile", "upstream", "served_name", "switch": null | {"to",
"stage", "since"}, "down_since"?, "standby"?, "asleep_since"?}}}; it is rewritten atomically (the
gatekeeper sees the old or the new file, never half). `down_since` is set by `composegen down` of an
aliased stack outside a switch, and goes at the next publish. `standby: true` (a profile with sleep
mode) makes the gate read the engine's sleeping 503, or its silence, as asleep; `asleep_since`
makes it answer 503 at once (honoured; nothing sets it today: a journal's stage marks an alias).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, NotRequired

# typing_extensions' TypedDict: pydantic reads these as report fields (edge/reports.py) on 3.11 too
from typing_extensions import TypedDict

from composegen import privatestate
from composegen.edge.config import Edge, upstream_host
from composegen.edge.journal import journal_path
from composegen.edge.keys import edge_dir
from composegen.errors import BadInput
from composegen.profiles.resolved import Resolved
from composegen.project import Project


class Proof(TypedDict):
    """What allowed a switch (edge/evidence.py): the sha256 of the file that decided."""

    kind: Literal["qualify", "campaign"]
    ref: str
    sha256: str
    campaign_evidence_sha256: NotRequired[str]  # a campaign's: the comparison it decided on
    # `promote --force REASON`: what did not match, and the operator's reason
    forced: NotRequired[str]


class Assignment(TypedDict):
    profile: str
    at: str | None
    by: str  # edge.yaml | promote | rollback
    evidence: Proof | None


class AssignmentsFile(TypedDict):
    aliases: dict[str, list[Assignment]]


class Switching(TypedDict):
    to: str | None
    stage: str
    since: NotRequired[str]


class Route(TypedDict):
    profile: str
    upstream: str
    served_name: str
    switch: Switching | None
    down_since: NotRequired[str]  # `composegen down` of its stack, outside a switch
    standby: NotRequired[bool]  # sleep mode: the engine may be asleep
    asleep_since: NotRequired[str]  # put to sleep outside a switch


class RoutesFile(TypedDict):
    retry_after: int
    aliases: dict[str, Route]


def assignments_path(project: Project) -> Path:
    return edge_dir(project) / "assignments.json"


def routes_path(project: Project) -> Path:
    return edge_dir(project) / "routes.json"


def history(project: Project, edge: Edge, alias: str) -> list[Assignment]:
    doc = privatestate.read_json(assignments_path(project), AssignmentsFile(aliases={}))
    entries = (
        (doc.get("aliases") or {}).get(alias) if isinstance(doc.get("aliases"), dict) else None
    )
    if not isinstance(entries, list) or not entries:
        initial = edge.config.aliases.get(alias)
        return (
            [Assignment(profile=initial, at=None, by="edge.yaml", evidence=None)] if initial else []
        )
    return [e for e in entries if isinstance(e, dict) and e.get("profile") in edge.stacks]


def current(project: Project, edge: Edge, alias: str) -> str | None:
    entries = history(project, edge, alias)
    return entries[-1]["profile"] if entries else None


def aliases(project: Project, edge: Edge) -> dict[str, str | None]:
    """Every alias (edge.yaml's and any promoted since) → its current profile."""
    doc = privatestate.read_json(assignments_path(project), AssignmentsFile(aliases={}))
    names = set(edge.config.aliases) | set(doc.get("aliases") or {})
    return {a: current(project, edge, a) for a in sorted(names)}


def record(
    project: Project, edge: Edge, alias: str, profile: str, by: str, evidence: Proof | None
) -> Assignment:
    doc = privatestate.read_json(assignments_path(project), AssignmentsFile(aliases={}))
    found = doc.get("aliases")
    table = found if isinstance(found, dict) else {}
    entries = history(project, edge, alias)
    entry = Assignment(profile=profile, at=privatestate.stamp(), by=by, evidence=evidence)
    table[alias] = [*entries, entry]
    privatestate.write_json(assignments_path(project), AssignmentsFile(aliases=table))
    return entry


def previous(project: Project, edge: Edge, alias: str) -> Assignment:
    """The assignment before the current one (what `rollback` returns to)."""
    entries = history(project, edge, alias)
    if not entries:
        msg = f"no alias {alias!r} (aliases: {', '.join(aliases(project, edge)) or 'none'})"
        raise BadInput(msg)
    for entry in reversed(entries[:-1]):
        if entry["profile"] != entries[-1]["profile"]:
            return entry
    msg = f"{alias} has no earlier assignment to return to (it has only ever been {entries[-1]['profile']})"
    raise BadInput(msg)


def publish(project: Project, edge: Edge, switching: dict[str, Switching] | None = None) -> None:
    """routes.json from the assignments; `switching` {alias: {"to", "stage"}} marks switches."""
    table: dict[str, Route] = {}
    for alias, profile in aliases(project, edge).items():
        if profile is None:
            continue
        table[alias] = _route(profile, edge.stacks[profile], (switching or {}).get(alias))
    privatestate.write_json(
        routes_path(project), RoutesFile(retry_after=edge.config.retry_after, aliases=table)
    )


def _route(profile: str, r: Resolved, switch: Switching | None) -> Route:
    since = (switch.get("since") if switch else None) or privatestate.stamp()
    route = Route(
        profile=profile,
        upstream=f"{upstream_host(profile)}:{r.profile.service.port.container}",
        served_name=r.profile.model.served_name,
        switch=Switching(to=switch["to"], stage=switch["stage"], since=since) if switch else None,
    )
    if r.profile.standby is not None:
        route["standby"] = True
    return route


def mark_down(project: Project, profile: str) -> list[str]:
    """PROFILE's stack was downed by hand: the aliases on it tell clients since when (the gate
    otherwise knows only its own first failure). The aliases marked; none during a switch (its
    own stage says more)."""
    path = routes_path(project)
    doc = privatestate.read_json(path, RoutesFile(retry_after=0, aliases={}))
    table = doc.get("aliases")
    marked = [
        alias
        for alias, route in (table.items() if isinstance(table, dict) else [])
        if isinstance(route, dict) and route.get("profile") == profile and not route.get("switch")
    ]
    if marked and journal_path(project).is_file():
        return []
    for alias in marked:
        doc["aliases"][alias]["down_since"] = privatestate.stamp()
    if marked:
        privatestate.write_json(path, doc)
    return marked
