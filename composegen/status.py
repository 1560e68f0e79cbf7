"""`composegen status`: what runs, whether it answers, and whether it drifted from out/."""
from __future__ import annotations

import re
import time
from datetime import datetime

from composegen import engine, readiness
from composegen.output import table
from composegen.project import Project

_HEADER_HASH = re.compile(r"^# profile: \S+  hash: ([0-9a-f]+)$", re.M)


def out_hash(project: Project, name: str) -> str | None:
    path = project.out_path(name)
    if not path.is_file():
        return None
    m = _HEADER_HASH.search(path.read_text(encoding="utf-8")[:400])
    return m.group(1) if m else None


def _started(ctr) -> float | None:
    stamp = ctr.attrs["State"].get("StartedAt", "")
    if not stamp or stamp.startswith("0001"):
        return None
    return datetime.fromisoformat(stamp[:26].rstrip("Z") + "+00:00").timestamp()


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
    stacks: dict[str, list] = {}
    for ctr in engine.composegen_containers():
        profile = ctr.labels.get("io.composegen.profile")
        if name is None or profile == name:
            stacks.setdefault(profile, []).append(ctr)
    result = []
    for profile, ctrs in sorted(stacks.items()):
        entries, model, health = [], None, None
        for ctr in ctrs:
            state = ctr.attrs["State"]
            started = _started(ctr)
            entries.append({
                "name": ctr.name,
                "state": state.get("Status"),
                "health": (state.get("Health") or {}).get("Status"),
                "restarts": ctr.attrs.get("RestartCount", 0),
                "exit_code": state.get("ExitCode"),
                "uptime_s": round(time.time() - started, 1) if started and state.get("Running") else None,
                "emulated": ctr.labels.get("io.composegen.emulated") == "true",
            })
            port = _host_port(ctr)
            if port and state.get("Running"):
                ep = readiness.Endpoint("127.0.0.1", port)
                health = readiness.health_ok(ep)
                model = readiness.models_entry(ep, ctr.labels.get("io.composegen.served-name", ""))
        created = _started(ctrs[0])
        result.append({
            "profile": profile,
            "project": ctrs[0].labels.get("com.docker.compose.project"),
            "containers": entries,
            "endpoint": {"healthy": health, "served_name": (model or {}).get("id"), "max_model_len": (model or {}).get("max_model_len")},
            "drift": drift(project, profile, ctrs[0].labels.get("io.composegen.hash"), created),
        })
    return result


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
    rows = []
    for s in stacks:
        for c in s["containers"]:
            up = f"{c['uptime_s']:.0f}s" if c["uptime_s"] is not None else "-"
            ep = s["endpoint"]
            api = "ready" if ep["healthy"] and ep["served_name"] else ("health 200" if ep["healthy"] else ("down" if ep["healthy"] is None else "unhealthy"))
            d = s["drift"]
            drift_text = d["state"] if d["state"] != "drifted" else f"drifted ({d['newer']} is newer)"
            rows.append([s["profile"] + (" (emulated)" if c["emulated"] else ""), c["name"], c["state"], c["health"] or "-", str(c["restarts"]), up, api, str(ep["max_model_len"] or "-"), drift_text])
    return table(rows, ["PROFILE", "CONTAINER", "STATE", "HEALTH", "RESTARTS", "UPTIME", "API", "MAX_LEN", "DRIFT"])
