"""/dev/shm of every node of a deployment (`down` of a multi-node stack, `shm --profile`).

`node_shm_report(r)` -> reports.NodesShm: per node its identity and either `scan` (shm.scan's
ShmScan, for the first node on this machine; further local nodes say `shared_with: NODE`, it is the
same /dev/shm) or `probe` (a remote node, from a labelled throw-away container on that host: free
and total bytes, entries with the leftover pattern each name matches; holders cannot be checked
remotely), or the `error` that kept it from being read."""

from __future__ import annotations

from typing import Any

from composegen.errors import ComposegenError, EngineError
from composegen.profiles.resolved import Resolved
from composegen.shm import scan
from composegen.stack import engine, hostprobe, placement
from composegen.stack.emulatorimage import image_tag
from composegen.stack.reports import NodeShm, NodesShm, ShmProbe, ShmProbeEntry
from composegen.units import format_bytes


def node_shm_report(r: Resolved) -> NodesShm:
    nodes: list[NodeShm] = []
    first_local = None
    for n in placement.nodes(r):
        entry = NodeShm.of(n)
        entry.local = n.target.is_local
        try:
            if n.target.is_local and first_local:
                # nodes on this machine share one /dev/shm: scanned once
                entry.shared_with = first_local
            elif n.target.is_local:
                entry.scan = scan.scan("/dev/shm", container_labels=engine.label_lookup())
                first_local = n.name
            else:
                probed = hostprobe.host_probe(_probe_image(r, n), n.project, n.target, [])
                entry.probe = _probe(probed["shm"], n)
        except ComposegenError as exc:
            entry.error = exc.message
        nodes.append(entry)
    return NodesShm(profile=r.name, nodes=nodes)


def _probe(found: Any, n: placement.NodeRef) -> ShmProbe:
    """The probe's /dev/shm figures, checked (they come off another host), names with patterns."""
    try:
        entries = [
            ShmProbeEntry(name=e["name"], bytes=e["bytes"], pattern=scan.match_pattern(e["name"]))
            for e in found["entries"]
        ]
        free, total = found["free_bytes"], found["total_bytes"]
        return ShmProbe(free_bytes=free, total_bytes=total, entries=entries)
    except (KeyError, TypeError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
        unexpected = f"unexpected answer ({exc.__class__.__name__})"
        raise EngineError(f"{n.target.label}: /dev/shm probe: {unexpected}") from None


def _probe_image(r: Resolved, n: placement.NodeRef) -> str:
    """An image that engine already holds and that has python3: the stack's own, the profile's, or
    (after an emulated run was taken down) the emulator's or its base image."""
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


def format_node_shm_text(report: NodesShm) -> str:
    out = []
    for n in report.nodes:
        out.append(f"==> node {n.name} (rank {n.rank}, {n.engine}) <==")
        if n.error:
            out.append(f"  unreachable: {n.error}")
        elif n.shared_with:
            both = "(both engines run on this machine)"
            out.append(f"  the same /dev/shm as node {n.shared_with} {both}")
        elif n.scan is not None:
            out.append(scan.format_text(n.scan).rstrip())
        elif n.probe is not None:
            p = n.probe
            known = [e for e in p.entries if e.pattern]
            out.append(
                f"  /dev/shm: {format_bytes(p.free_bytes)} free of {format_bytes(p.total_bytes)}; "
                f"{len(p.entries)} entries, {len(known)} named like leftovers (holders not checked remotely)"
            )
            out += [f"  {e.pattern:<14} {format_bytes(e.bytes):>10}  {e.name}" for e in known]
    return "\n".join(out) + "\n"
