"""Compose documents from resolved profiles, via templates/compose.yaml.j2; atomic writes; drift check.

Same profiles give byte-identical files: nothing time- or host-dependent reaches the output.

Keys of `render_all`/`render_stack` are paths under out/ without `/compose.yaml`: a single-node profile
renders `NAME` (out/NAME/compose.yaml); a multi-node profile (`nodes:`) renders one file per node,
`NAME/NODE` (out/NAME/NODE/compose.yaml), each its own compose project `composegen-NAME-NODE` on the
host network (no `ports:`), with vLLM's --nnodes/--node-rank/--master-addr/--master-port (workers
--headless and without a healthcheck: a headless node serves no HTTP), the node's environment merged
over service.environment, the node's GPUs and HF cache, `io.composegen.node`/`io.composegen.node-rank`
labels, and /dev/infiniband + IPC_LOCK when `nodes.rdma`. Where one text must stand for a multi-node
stack (`render(r)`, `diff PROFILE`), it is the head's.
"""
from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from composegen import profile as profiles
from composegen import rules
from composegen.project import Project, atomic_write, templates_dir
from composegen.schema import Node

HEALTH_PY = "import urllib.request; urllib.request.urlopen('http://{host}:{port}/health', timeout=5)"
LABEL_PREFIX = "io.composegen."


@lru_cache(maxsize=1)
def _template():
    import jinja2  # imported here: `composegen --version` must stay fast

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    # JSON scalars and flow collections are valid YAML and need no further quoting rules.
    env.filters["j"] = lambda v: json.dumps(v, ensure_ascii=False)
    return env.get_template("compose.yaml.j2")


def project_name(r: profiles.Resolved, node: Node | None = None) -> str:
    base = f"composegen-{r.name}" if node is None else f"composegen-{r.name}-{node.name}"
    return base.lower().replace(".", "-")


def node_key(r: profiles.Resolved, node: Node) -> str:
    """The out/ key of one node's file: NAME/NODE."""
    return f"{r.name}/{node.name}"


def members(r: profiles.Resolved) -> list[Node]:
    """The nodes of a multi-node profile by rank (head first); [] for a single-node profile."""
    return sorted(r.profile.nodes.members, key=lambda m: m.rank) if r.profile.nodes else []


def head(r: profiles.Resolved) -> Node | None:
    return members(r)[0] if r.profile.nodes else None


def context(r: profiles.Resolved, node: Node | None = None) -> dict[str, Any]:
    p, svc = r.profile, r.profile.service
    ulimits = {k: (v if isinstance(v, int) else v.model_dump()) for k, v in sorted(svc.ulimits.items())}
    volumes = [f"{v.source}:{v.target}{':ro' if v.read_only else ''}" for v in svc.volumes]
    labels = {
        f"{LABEL_PREFIX}profile": r.name,
        f"{LABEL_PREFIX}hash": r.hash,
        f"{LABEL_PREFIX}served-name": p.model.served_name,
        f"{LABEL_PREFIX}vllm-version": p.vllm_version,
    }
    ctx = {
        "source": r.path,
        "name": r.name,
        "hash": r.hash,
        "node_line": None,
        "project": project_name(r),
        "image": p.image,
        "container_name": svc.container_name,
        "command": r.argv(),
        "network_mode": None,
        "port": f"{svc.port.bind}:{svc.port.host}:{svc.port.container}",
        "environment": sorted((k, str(v)) for k, v in svc.environment.items()),
        "volumes": volumes,
        "named_volumes": sorted({v.source for v in svc.volumes if v.named}),
        "ipc": svc.ipc if svc.ipc != "private" else "private",
        "shm_size": svc.shm_size,
        "init": svc.init,
        "ulimits": list(ulimits.items()),
        "devices": [],
        "cap_add": [],
        "gpus": svc.gpus,
        "stop_grace_period": svc.stop_grace_period,
        "restart": svc.restart,
        "healthcheck": ["CMD", "python3", "-c", HEALTH_PY.format(host="127.0.0.1", port=svc.port.container)],
        # Failures inside start_period do not count, so it must cover the whole model load.
        "start_period": f"{svc.startup_timeout}s",
        "labels": sorted(labels.items()),
    }
    if node is not None:
        ctx.update(_node_context(r, node, labels))
    return ctx


def _node_context(r: profiles.Resolved, node: Node, labels: dict) -> dict[str, Any]:
    nodes, svc = r.profile.nodes, r.profile.service
    is_head = node.rank == 0
    role = "head" if is_head else "worker, headless"
    sources = {v.target: v.source for v in svc.volumes}
    if node.hf_cache:
        sources[rules.HF_CACHE_TARGET] = node.hf_cache
    mounts = [(v.target, v.read_only) for v in svc.volumes]
    if node.hf_cache and rules.HF_CACHE_TARGET not in dict(mounts):
        mounts.append((rules.HF_CACHE_TARGET, False))
    labels = {**labels, f"{LABEL_PREFIX}node": node.name, f"{LABEL_PREFIX}node-rank": str(node.rank)}
    # The head listens on the host network: its health probe goes to the API's own address and port.
    probe_host = "127.0.0.1" if svc.port.bind in ("0.0.0.0", "") else ("::1" if svc.port.bind == "::" else svc.port.bind)
    return {
        "node_line": f"node: {node.name}  rank: {node.rank} of {len(nodes.members)} ({role})",
        "project": project_name(r, node),
        "container_name": f"{svc.container_name}-{node.name}" if svc.container_name else None,
        "command": r.argv(node),
        "network_mode": "host",
        "environment": sorted((k, str(v)) for k, v in {**svc.environment, **node.environment}.items()),
        "volumes": [f"{sources[target]}:{target}{':ro' if ro else ''}" for target, ro in mounts],
        "devices": ["/dev/infiniband:/dev/infiniband"] if nodes.rdma else [],
        # RDMA registers (pins) memory: IPC_LOCK lets the verbs library lock it.
        "cap_add": ["IPC_LOCK"] if nodes.rdma else [],
        "gpus": node.gpus or svc.gpus,
        "healthcheck": ["CMD", "python3", "-c", HEALTH_PY.format(host=_url_host(probe_host), port=svc.port.host)] if is_head else None,
        "labels": sorted(labels.items()),
    }


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def render(r: profiles.Resolved, node: Node | None = None) -> str:
    """One compose text: the profile's, or one node's (a multi-node profile without `node`: the head's)."""
    if node is None and r.profile.nodes is not None:
        node = head(r)
    return _template().render(**context(r, node))


def render_stack(r: profiles.Resolved) -> dict[str, str]:
    """Every file of one profile: {NAME: text} or {NAME/NODE: text, …} by rank."""
    if r.profile.nodes is None:
        return {r.name: render(r)}
    return {node_key(r, m): render(r, m) for m in members(r)}


def render_profile_text(root, name: str) -> str:
    """The compose text of profile `name` (or `name/node`) in the project at `root` (used by diff)."""
    project = root if isinstance(root, Project) else Project(root)
    base, _, node_name = name.partition("/")
    r = profiles.load(project, base)
    node = next((m for m in members(r) if m.name == node_name), None) if node_name else None
    if node_name and node is None:
        from composegen.errors import BadInput

        raise BadInput(f"{r.path}: nodes.members: no node {node_name!r}")
    return render(r, node)


@dataclass
class Drift:
    path: str
    reason: str  # "stale", "missing", "orphan"
    diff: str


def render_all(project: Project, names: list[str] | None = None) -> dict[str, str]:
    """Render every named profile (all by default) in memory first: bad input writes nothing."""
    rendered: dict[str, str] = {}
    for r in profiles.load_all(project, names):
        rendered.update(render_stack(r))
    return rendered


def write(project: Project, rendered: dict[str, str]) -> list[str]:
    written = []
    for name, text in rendered.items():
        path = project.out_path(name)
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            continue
        atomic_write(path, text)
        written.append(project.rel(path))
    return written


def check(project: Project, rendered: dict[str, str], *, all_profiles: bool) -> list[Drift]:
    drift: list[Drift] = []
    for name, text in rendered.items():
        path = project.out_path(name)
        rel = project.rel(path)
        current = path.read_text(encoding="utf-8") if path.is_file() else ""
        if current != text:
            diff = "".join(difflib.unified_diff(current.splitlines(True), text.splitlines(True), f"a/{rel}", f"b/{rel}"))
            drift.append(Drift(rel, "stale" if current else "missing", diff))
    if all_profiles and project.out_dir.is_dir():
        # Both depths: out/NAME/compose.yaml (single node) and out/NAME/NODE/compose.yaml (multi-node).
        for compose in sorted(project.out_dir.glob("*/compose.yaml")):
            if compose.parent.name not in rendered:
                rel = project.rel(compose)
                drift.append(Drift(rel, "orphan", f"{rel}: no profiles/{compose.parent.name}.yaml renders this file\n"))
        for compose in sorted(project.out_dir.glob("*/*/compose.yaml")):
            name, node = compose.parent.parent.name, compose.parent.name
            if f"{name}/{node}" not in rendered:
                rel = project.rel(compose)
                drift.append(Drift(rel, "orphan", f"{rel}: no node {node!r} in profiles/{name}.yaml renders this file\n"))
    return drift
