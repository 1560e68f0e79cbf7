"""Which stack each alias points at, and what the gatekeeper is told.

.composegen/edge/assignments.json: per alias, the history of assignments, newest last:
    {"aliases": {ALIAS: [{"profile", "at", "by" ("edge.yaml" | "promote" | "rollback"), "evidence"
                           ({"kind": "qualify" | "campaign", "ref", "sha256"} | null)}]}}
With no history an alias points where edge.yaml says. .composegen/edge/routes.json is what the gatekeeper
reads: {"retry_after", "aliases": {ALIAS: {"profile", "upstream", "served_name", "switch": null | {"to",
"stage", "since"}}}}; it is rewritten atomically (the gatekeeper sees the old or the new file, never half).
"""

from __future__ import annotations

from typing import Any

from composegen.edge.config import Edge, upstream_host
from composegen.edge.keys import edge_dir, iso, now_utc, read_json, write_json
from composegen.errors import BadInput
from composegen.project import Project


def assignments_path(project: Project):
    return edge_dir(project) / "assignments.json"


def routes_path(project: Project):
    return edge_dir(project) / "routes.json"


def history(project: Project, edge: Edge, alias: str) -> list[dict[str, Any]]:
    doc = read_json(assignments_path(project), {"aliases": {}})
    entries = (doc.get("aliases") or {}).get(alias) if isinstance(doc.get("aliases"), dict) else None
    if not isinstance(entries, list) or not entries:
        initial = edge.config.aliases.get(alias)
        return [{"profile": initial, "at": None, "by": "edge.yaml", "evidence": None}] if initial else []
    return [e for e in entries if isinstance(e, dict) and e.get("profile") in edge.stacks]


def current(project: Project, edge: Edge, alias: str) -> str | None:
    entries = history(project, edge, alias)
    return entries[-1]["profile"] if entries else None


def aliases(project: Project, edge: Edge) -> dict[str, str | None]:
    """Every alias (edge.yaml's and any promoted since) → its current profile."""
    doc = read_json(assignments_path(project), {"aliases": {}})
    names = set(edge.config.aliases) | set(doc.get("aliases") or {})
    return {a: current(project, edge, a) for a in sorted(names)}


def record(project: Project, edge: Edge, alias: str, profile: str, by: str, evidence: dict | None) -> dict:
    doc = read_json(assignments_path(project), {"aliases": {}})
    found = doc.get("aliases")
    table: dict = found if isinstance(found, dict) else {}
    entries = history(project, edge, alias)
    entry = {"profile": profile, "at": iso(now_utc()), "by": by, "evidence": evidence}
    table[alias] = [*entries, entry]
    write_json(assignments_path(project), {"aliases": table})
    return entry


def previous(project: Project, edge: Edge, alias: str) -> dict[str, Any]:
    """The assignment before the current one (what `rollback` returns to)."""
    entries = history(project, edge, alias)
    if not entries:
        raise BadInput(f"no alias {alias!r} (aliases: {', '.join(aliases(project, edge)) or 'none'})")
    for entry in reversed(entries[:-1]):
        if entry["profile"] != entries[-1]["profile"]:
            return entry
    raise BadInput(f"{alias} has no earlier assignment to return to (it has only ever been {entries[-1]['profile']})")


def publish(project: Project, edge: Edge, switching: dict[str, dict] | None = None) -> None:
    """Write routes.json from the assignments; `switching` {alias: {"to", "stage"}} marks aliases mid-switch."""
    table = {}
    for alias, profile in aliases(project, edge).items():
        if profile is None:
            continue
        r = edge.stacks[profile]
        switch = (switching or {}).get(alias)
        table[alias] = {
            "profile": profile,
            "upstream": f"{upstream_host(profile)}:{r.profile.service.port.container}",
            "served_name": r.profile.model.served_name,
            "switch": {**switch, "since": switch.get("since") or iso(now_utc())} if switch else None,
        }
    write_json(routes_path(project), {"retry_after": edge.config.retry_after, "aliases": table})
