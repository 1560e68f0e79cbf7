"""/dev/shm of every node of a deployment (`down` of a multi-node stack, `shm --profile`).

`node_shm_report(r)` → {profile, nodes: [{name, rank, role, engine, project, local, scan|null, probe|null,
shared_with|null, error}]}: scan is shm.scan's report (for the first node on this machine; further local
nodes say shared_with: NODE, it is the same /dev/shm); probe, for a remote node, comes from a labelled
throw-away container on that host: {free_bytes, total_bytes, entries: [{name, bytes, pattern}]}
(pattern = shm.match_pattern; holders cannot be checked remotely).
"""

from __future__ import annotations

from typing import Any

from composegen.errors import ComposegenError, EngineError
from composegen.profiles.resolved import Resolved
from composegen.stack import engine, hostprobe, placement
from composegen.units import format_bytes


def node_shm_report(r: Resolved) -> dict[str, Any]:
    from composegen.shm import scan as shm

    nodes: list[dict[str, Any]] = []
    first_local = None
    for n in placement.nodes(r):
        entry: dict[str, Any] = {
            **n.to_json(),
            "local": n.target.is_local,
            "scan": None,
            "probe": None,
            "shared_with": None,
            "error": None,
        }
        try:
            if n.target.is_local and first_local:
                entry["shared_with"] = first_local  # nodes on this machine share one /dev/shm: scanned once
            elif n.target.is_local:
                entry["scan"], first_local = shm.scan("/dev/shm", container_labels=engine.label_lookup()), n.name
            else:
                probe = hostprobe.host_probe(_probe_image(r, n), r.name, n.target, [])["shm"]
                probe["entries"] = [{**e, "pattern": shm.match_pattern(e["name"])} for e in probe["entries"]]
                entry["probe"] = probe
        except ComposegenError as exc:
            entry["error"] = exc.message
        nodes.append(entry)
    return {"profile": r.name, "nodes": nodes}


def _probe_image(r: Resolved, n: placement.NodeRef) -> str:
    """An image that engine already holds and that has python3: the stack's own, the profile's, or
    (after an emulated run was taken down) the emulator's or its base image."""
    from composegen.emulator.image import image_tag

    ctrs = engine.project_containers(n.project, n.target)
    if ctrs:
        return ctrs[0].image_id
    for ref in (r.profile.image, image_tag(), engine.BASE_IMAGE):
        if engine.image_present(ref, n.target):
            return ref
    raise EngineError(
        f"no image with python3 on {n.target.label} to look at /dev/shm with (neither the profile's image, "
        "the emulator's nor the base image is there)"
    )


def format_node_shm_text(report: dict[str, Any]) -> str:
    from composegen.shm import scan as shm

    out = []
    for n in report["nodes"]:
        out.append(f"==> node {n['name']} (rank {n['rank']}, {n['engine']}) <==")
        if n["error"]:
            out.append(f"  unreachable: {n['error']}")
        elif n["shared_with"]:
            out.append(f"  the same /dev/shm as node {n['shared_with']} (both engines run on this machine)")
        elif n["scan"] is not None:
            out.append(shm.format_text(n["scan"]).rstrip())
        else:
            p = n["probe"]
            known = [e for e in p["entries"] if e["pattern"]]
            out.append(
                f"  /dev/shm: {format_bytes(p['free_bytes'])} free of {format_bytes(p['total_bytes'])}; "
                f"{len(p['entries'])} entries, {len(known)} named like leftovers (holders not checked remotely)"
            )
            out += [f"  {e['pattern']:<14} {format_bytes(e['bytes']):>10}  {e['name']}" for e in known]
    return "\n".join(out) + "\n"
