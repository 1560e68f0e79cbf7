"""`composegen status`: what runs, whether it answers, and whether it drifted from out/.

`stack_status(project, name=None)` → [stack]; stack = {profile, project, containers: [{name, state, health,
restarts, exit_code, uptime_s, emulated}], endpoint{healthy, served_name, max_model_len}, drift{state:
in-sync|drifted|unknown, running, out, newer}}. Without a name it lists what runs on the local engine.

A multi-node profile (asked for by name, or found on the local engine by its `io.composegen.node` label) is
asked on EVERY node's engine: its containers also carry {node, rank, engine}; a node that cannot be reached
shows as a container row with state "unreachable" (name null) and one with no container as "missing";
the stack adds nodes: [{name, rank, role, engine, project, reachable, error, drift}] and its drift is the
first drifted node's (else the head's); the endpoint is the head's API.

`node_shm_report(r)` → {profile, nodes: [{name, rank, role, engine, project, local, scan|null, probe|null,
shared_with|null, error}]}: /dev/shm of every node of a multi-node profile. scan is shm.scan's report (for
the first node on this machine; further local nodes say shared_with: NODE, it is the same /dev/shm);
probe, for a remote node, comes from a throw-away container on that host: {free_bytes, total_bytes,
entries: [{name, bytes, pattern}]} (pattern = shm.match_pattern; holders cannot be checked remotely).
"""

from __future__ import annotations

import re
import time

from composegen.errors import BadInput, ComposegenError, EngineError
from composegen.output import table
from composegen.project import Project
from composegen.stack import engine, readiness

NODE_LABEL = "io.composegen.node"

_HEADER_HASH = re.compile(r"^# profile: \S+  hash: ([0-9a-f]+)$", re.M)


def out_hash(project: Project, name: str) -> str | None:
    path = project.out_path(name)
    if not path.is_file():
        return None
    m = _HEADER_HASH.search(path.read_text(encoding="utf-8")[:400])
    return m.group(1) if m else None


def _started(ctr) -> float | None:
    return engine.docker_time(ctr.attrs["State"].get("StartedAt", ""))


def drift(project: Project, name: str, running_hash: str | None, created: float | None) -> dict:
    current = out_hash(project, name)
    if current is None:
        return {"state": "unknown", "running": running_hash, "out": None, "newer": None}
    if current == running_hash:
        return {"state": "in-sync", "running": running_hash, "out": current, "newer": None}
    out_mtime = project.out_path(name).stat().st_mtime
    newer = "out" if created is None or out_mtime > created else "running"
    return {"state": "drifted", "running": running_hash, "out": current, "newer": newer}


def stack_status(project: Project, name: str | None = None) -> list[dict]:
    if name is not None and (r := _multi_node(project, name)) is not None:
        return [node_stack_status(project, r)]
    stacks: dict[str, list] = {}
    for ctr in engine.composegen_containers():
        profile = ctr.labels.get("io.composegen.profile")
        if name is None or profile == name:
            stacks.setdefault(profile, []).append(ctr)
    result = []
    for profile, ctrs in sorted(stacks.items()):
        r = _multi_node(project, profile) if any(c.labels.get(NODE_LABEL) for c in ctrs) else None
        if r is not None:
            result.append(node_stack_status(project, r))
            continue
        entries, model, health = [], None, None
        for ctr in ctrs:
            state = ctr.attrs["State"]
            entries.append(_container_entry(ctr))
            port = _host_port(ctr)
            if port and state.get("Running"):
                ep = readiness.Endpoint("127.0.0.1", port)
                health = readiness.health_ok(ep)
                model = readiness.models_entry(ep, ctr.labels.get("io.composegen.served-name", ""))
        created = _started(ctrs[0])
        result.append(
            {
                "profile": profile,
                "project": ctrs[0].labels.get("com.docker.compose.project"),
                "containers": entries,
                "endpoint": {
                    "healthy": health,
                    "served_name": (model or {}).get("id"),
                    "max_model_len": (model or {}).get("max_model_len"),
                },
                "drift": drift(project, profile, ctrs[0].labels.get("io.composegen.hash"), created),
            }
        )
    return result


def _container_entry(ctr) -> dict:
    state = ctr.attrs["State"]
    started = _started(ctr)
    return {
        "name": ctr.name,
        "state": state.get("Status"),
        "health": (state.get("Health") or {}).get("Status"),
        "restarts": ctr.attrs.get("RestartCount", 0),
        "exit_code": state.get("ExitCode"),
        "uptime_s": round(time.time() - started, 1) if started and state.get("Running") else None,
        "emulated": ctr.labels.get("io.composegen.emulated") == "true",
    }


def _multi_node(project: Project, name: str | None):
    """The resolved profile when `name` is a loadable multi-node profile, else None."""
    from composegen.profiles import resolve as profile

    if not name or not project.profile_path(name).is_file():
        return None
    try:
        r = profile.load(project, name)
    except BadInput:
        return None  # a broken profile: fall back to what the local engine shows
    return r if r.profile.nodes is not None else None


def node_stack_status(project: Project, r) -> dict:
    """One multi-node stack, asked on every node's engine (see the module docstring)."""
    from composegen.stack import multinode

    containers, nodes, head_running = [], [], False
    for n in multinode.refs(r):
        where = {"node": n.node.name, "rank": n.node.rank, "engine": n.target.label}
        info = {**n.to_json(), "reachable": True, "error": None, "drift": None}
        try:
            ctrs = [
                c
                for c in engine.project_containers(n.project, n.target)
                if c.labels.get("com.docker.compose.service") == "vllm"
            ]
        except ComposegenError as exc:
            info.update(reachable=False, error=exc.message)
            containers.append({**_placeholder("unreachable"), **where})
            nodes.append(info)
            continue
        containers += [{**_container_entry(c), **where} for c in ctrs] or [{**_placeholder("missing"), **where}]
        if ctrs:
            info["drift"] = drift(project, n.key, ctrs[0].labels.get("io.composegen.hash"), _started(ctrs[0]))
            head_running = head_running or (n.role == "head" and ctrs[0].attrs["State"].get("Running"))
        nodes.append(info)
    health, model = None, None
    if head_running:
        ep = multinode.api_endpoint(r)
        health = readiness.health_ok(ep)
        model = readiness.models_entry(ep, r.profile.model.served_name)
    drifts = [x["drift"] for x in nodes if x["drift"]]
    overall = next(
        (d for d in drifts if d["state"] == "drifted"),
        drifts[0] if drifts else {"state": "unknown", "running": None, "out": None, "newer": None},
    )
    return {
        "profile": r.name,
        "project": nodes[0]["project"],
        "containers": containers,
        "endpoint": {
            "healthy": health,
            "served_name": (model or {}).get("id"),
            "max_model_len": (model or {}).get("max_model_len"),
        },
        "drift": overall,
        "nodes": nodes,
    }


def _placeholder(state: str) -> dict:
    return {
        "name": None,
        "state": state,
        "health": None,
        "restarts": 0,
        "exit_code": None,
        "uptime_s": None,
        "emulated": False,
    }


def _host_port(ctr) -> int | None:
    ports = (ctr.attrs.get("NetworkSettings") or {}).get("Ports") or {}
    for bindings in ports.values():
        for b in bindings or []:
            if b.get("HostPort"):
                return int(b["HostPort"])
    return None


def format_text(stacks: list[dict]) -> str:
    if not stacks:
        return "no composegen stacks on this engine\n"
    rows, notes = [], []
    multi = any("nodes" in s for s in stacks)
    for s in stacks:
        for c in s["containers"]:
            up = f"{c['uptime_s']:.0f}s" if c["uptime_s"] is not None else "-"
            ep = s["endpoint"]
            api = (
                "ready"
                if ep["healthy"] and ep["served_name"]
                else ("health 200" if ep["healthy"] else ("down" if ep["healthy"] is None else "unhealthy"))
            )
            d = s["drift"]
            drift_text = d["state"] if d["state"] != "drifted" else f"drifted ({d['newer']} is newer)"
            node = [f"{c['node']} (rank {c['rank']})" if "node" in c else "-"] if multi else []
            rows.append(
                [
                    s["profile"] + (" (emulated)" if c["emulated"] else ""),
                    *node,
                    c["name"] or "-",
                    c["state"],
                    c["health"] or "-",
                    str(c["restarts"]),
                    up,
                    api,
                    str(ep["max_model_len"] or "-"),
                    drift_text,
                ]
            )
        notes += [
            f"{s['profile']}: node {n['name']} ({n['engine']}) unreachable: {n['error']}"
            for n in s.get("nodes", [])
            if not n["reachable"]
        ]
    header = [
        "PROFILE",
        *(["NODE"] if multi else []),
        "CONTAINER",
        "STATE",
        "HEALTH",
        "RESTARTS",
        "UPTIME",
        "API",
        "MAX_LEN",
        "DRIFT",
    ]
    return table(rows, header) + "".join(f"{line}\n" for line in notes)


def node_shm_report(r) -> dict:
    """/dev/shm of every node: a full scan (holders, classes) where the engine is on this machine, else a
    listing from a probe container on that host (free space, names matching known leftover patterns)."""
    from composegen.shm import scan as shm
    from composegen.stack import multinode

    nodes, first_local = [], None
    for n in multinode.refs(r):
        entry = {
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
                entry["scan"], first_local = shm.scan("/dev/shm"), n.node.name
            else:
                probe = engine.host_probe(_probe_image(r, n), n.target, [])["shm"]
                probe["entries"] = [{**e, "pattern": shm.match_pattern(e["name"])} for e in probe["entries"]]
                entry["probe"] = probe
        except ComposegenError as exc:
            entry["error"] = exc.message
        nodes.append(entry)
    return {"profile": r.name, "nodes": nodes}


def _probe_image(r, n) -> str:
    ctrs = engine.project_containers(n.project, n.target)
    if ctrs:
        return ctrs[0].image.tags[0] if ctrs[0].image.tags else ctrs[0].image.id
    if engine.image_present(r.profile.image, n.target):
        return r.profile.image
    raise EngineError(
        f"no image with python3 on {n.target.label} to look at /dev/shm with (the profile's image is not there)"
    )


def format_node_shm_text(report: dict) -> str:
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
                f"  /dev/shm: {shm.human_bytes(p['free_bytes'])} free of {shm.human_bytes(p['total_bytes'])}; "
                f"{len(p['entries'])} entries, {len(known)} named like leftovers (holders not checked remotely)"
            )
            out += [f"  {e['pattern']:<14} {shm.human_bytes(e['bytes']):>10}  {e['name']}" for e in known]
    return "\n".join(out) + "\n"
