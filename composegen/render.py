"""Compose documents from resolved profiles, via templates/compose.yaml.j2; atomic writes; drift
check.

Same profiles give byte-identical files: nothing time- or host-dependent reaches the output.

Keys of `render_all`/`render_stack` are paths under out/ without `/compose.yaml`: a single-node
profile renders `NAME` (out/NAME/compose.yaml); a multi-node profile (`nodes:`) renders one file per
node, `NAME/NODE` (out/NAME/NODE/compose.yaml), each its own compose project `SCOPE-NAME-NODE` (SCOPE:
composegen or composegen.yaml's) on the host network (no `ports:`), with vLLM's --nnodes/--node-rank/
--master-addr/--master-port (workers --headless and without a healthcheck: a headless node serves no
HTTP), the node's environment merged over service.environment, the node's GPUs and HF cache,
`io.composegen.node`/`io.composegen.node-rank` labels, and /dev/infiniband + IPC_LOCK when
`nodes.rdma`. Where one text must stand for a multi-node stack (`render(r)`, `diff PROFILE`), it is
the head's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from composegen.errors import BadInput
from composegen.profiles import caches, resolve, rules
from composegen.profiles.schema import Node
from composegen.profiles.service import REF_RE
from composegen.project import Project, compose_project
from composegen.templating import literal, template, with_references

HEALTH_PY = (
    "import urllib.request; urllib.request.urlopen('http://{host}:{port}/health', timeout=5)"
)
LABEL_PREFIX = "io.composegen."


UNSAFE_MOUNTS_LABEL = f"{LABEL_PREFIX}unsafe-mounts"  # diff: functional; status: shown
# diff: functional; status: shown (local-build only)
IMAGE_POLICY_LABEL = f"{LABEL_PREFIX}image-policy"


def unsafe_mounts_label(unsafe: list) -> dict[str, str]:
    """The reviewed mount exceptions as a label on the container ({} when there are none)."""
    if not unsafe:
        return {}
    return {
        UNSAFE_MOUNTS_LABEL: json.dumps([{"source": m.source, "reason": m.reason} for m in unsafe])
    }


def volume_spec(source: str, target: str, read_only: bool) -> str:
    """The short volume syntax, escaped: the source may hold `${VAR}` references, the target is
    literal."""
    return f"{with_references(source)}:{literal(target)}{':ro' if read_only else ''}"


def _env_value(value: str) -> str:
    # A whole-value reference is how a secret (or any host setting) comes from the environment.
    return value if REF_RE.fullmatch(value) else literal(value)


def _literals(value: Any) -> Any:
    if isinstance(value, str):
        return literal(value)
    if isinstance(value, list):
        return [_literals(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_literals(v) for v in value)
    return value


def project_name(r: resolve.Resolved, node: Node | None = None) -> str:
    return compose_project(r.name, None if node is None else node.name, r.prefix)


def node_key(r: resolve.Resolved, node: Node) -> str:
    """The out/ key of one node's file: NAME/NODE."""
    return f"{r.name}/{node.name}"


def members(r: resolve.Resolved) -> list[Node]:
    """The nodes of a multi-node profile by rank (head first); [] for a single-node profile."""
    return r.profile.nodes.by_rank if r.profile.nodes else []


def head(r: resolve.Resolved) -> Node | None:
    return members(r)[0] if r.profile.nodes else None


def _labels(r: resolve.Resolved) -> dict[str, str]:
    p = r.profile
    return {
        f"{LABEL_PREFIX}profile": r.name,
        f"{LABEL_PREFIX}hash": r.hash,
        f"{LABEL_PREFIX}served-name": p.model.served_name,
        f"{LABEL_PREFIX}vllm-version": p.vllm_version,
        **unsafe_mounts_label(p.service.unsafe_mounts),
        **({IMAGE_POLICY_LABEL: p.image_policy} if p.image_policy != "pinned" else {}),
    }


def hf_home(r: resolve.Resolved, node: Node | None) -> str | None:
    """The Hugging Face mount's target, when the stack (node) mounts one where HF_HOME would point."""
    mounted = {v.target for v in r.profile.service.volumes}
    if node is not None and node.hf_cache:
        mounted.add(rules.HF_CACHE_TARGET)
    return rules.HF_CACHE_TARGET if rules.HF_CACHE_TARGET in mounted else None


def environment(r: resolve.Resolved, node: Node | None) -> list[tuple[str, str]]:
    """The container's environment, sorted: the profile's (a node's over it) over the caches'."""
    svc = r.profile.service
    env = (
        r.environment()
        if node is None
        else {k: str(v) for k, v in {**svc.environment, **node.environment}.items()}
    )
    return sorted(caches.environment(r, env, hf_home(r, node)).items())


def cache_mount(r: resolve.Resolved, node: Node | None) -> list[str]:
    """The caches' mount (docs/caches.md), as the compose file at out/NAME[/NODE]/ spells it."""
    source = caches.source(r, 2 if node is None else 3)
    return [] if source is None else [volume_spec(source, caches.CACHE_TARGET, False)]


def context(r: resolve.Resolved, node: Node | None = None) -> dict[str, Any]:
    p, svc = r.profile, r.profile.service
    volumes = [volume_spec(v.source, v.target, v.read_only) for v in svc.volumes]
    labels = _labels(r)
    ctx: dict[str, Any] = {
        "source": r.path,
        "name": r.name,
        "hash": r.hash,
        "node_line": None,
        "project": project_name(r),
        "image": p.image,
        # A locally built tag is never pulled: a registry's image of the same name is not the one
        # reviewed.
        "pull_policy": "never" if p.image_policy == "local-build" else None,
        "container_name": svc.container_name,
        "command": r.argv(),
        "network_mode": None,
        "port": f"{svc.port.bind}:{svc.port.host}:{svc.port.container}",
        "environment": environment(r, None),
        "volumes": volumes + cache_mount(r, None),
        "named_volumes": sorted({v.source for v in svc.volumes if v.named}),
        "cache_volume": caches.volume(r),
        "ipc": svc.ipc,
        "shm_size": svc.shm_size,
        "init": svc.init,
        "ulimits": list(svc.ulimits_plain().items()),
        "devices": [],
        "cap_add": [],
        "gpus": svc.gpus,
        "stop_grace_period": svc.stop_grace_period,
        "restart": svc.restart,
        "healthcheck": [
            "CMD",
            "python3",
            "-c",
            HEALTH_PY.format(host="127.0.0.1", port=svc.port.container),
        ],
        # Failures inside start_period do not count, so it must cover the whole model load.
        "start_period": f"{svc.startup_timeout}s",
        "labels": sorted(labels.items()),
    }
    if node is not None:
        ctx.update(_node_context(r, node, labels))
    ctx["monitoring"] = _monitoring(r, node, ctx)  # a dict: _escaped leaves it as it is
    return _escaped(ctx)


# Context entries that are not literal text: references compose resolves (volumes are escaped
# when built), or structures the template takes apart itself (gpus: typed fields, each checked by
# the schema's grammar).
_NOT_LITERAL = {"environment", "volumes", "gpus", "named_volumes"}


def _escaped(ctx: dict[str, Any]) -> dict[str, Any]:
    out = {k: (v if k in _NOT_LITERAL else _literals(v)) for k, v in ctx.items()}
    out["environment"] = [(k, _env_value(v)) for k, v in ctx["environment"]]
    return out


def _node_context(r: resolve.Resolved, node: Node, labels: dict) -> dict[str, Any]:
    nodes, svc = r.profile.nodes, r.profile.service
    assert nodes is not None  # a node context exists only for a multi-node profile
    is_head = node.rank == 0
    role = "head" if is_head else "worker, headless"
    sources = {v.target: v.source for v in svc.volumes}
    if node.hf_cache:
        sources[rules.HF_CACHE_TARGET] = node.hf_cache
    mounts = [(v.target, v.read_only) for v in svc.volumes]
    if node.hf_cache and rules.HF_CACHE_TARGET not in dict(mounts):
        mounts.append((rules.HF_CACHE_TARGET, False))
    labels = {
        **labels,
        f"{LABEL_PREFIX}node": node.name,
        f"{LABEL_PREFIX}node-rank": str(node.rank),
    }
    # The head listens on the host network: its health probe goes to the API's own address and port.
    probe_host = (
        "127.0.0.1"
        if svc.port.bind in ("0.0.0.0", "")
        else ("::1" if svc.port.bind == "::" else svc.port.bind)
    )
    return {
        "node_line": f"node: {node.name}  rank: {node.rank} of {len(nodes.members)} ({role})",
        "project": project_name(r, node),
        "container_name": f"{svc.container_name}-{node.name}" if svc.container_name else None,
        "command": r.argv(node),
        "network_mode": "host",
        "environment": environment(r, node),
        "volumes": [volume_spec(sources[target], target, ro) for target, ro in mounts]
        + cache_mount(r, node),
        "devices": ["/dev/infiniband:/dev/infiniband"] if nodes.rdma else [],
        # RDMA registers (pins) memory: IPC_LOCK lets the verbs library lock it.
        "cap_add": ["IPC_LOCK"] if nodes.rdma else [],
        "gpus": node.gpus or svc.gpus,
        "healthcheck": [
            "CMD",
            "python3",
            "-c",
            HEALTH_PY.format(host=_url_host(probe_host), port=svc.port.host),
        ]
        if is_head
        else None,
        "labels": sorted(labels.items()),
    }


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def render(r: resolve.Resolved, node: Node | None = None) -> str:
    """One compose text: the profile's, or one node's (a multi-node profile without `node`: the
    head's)."""
    if node is None and r.profile.nodes is not None:
        node = head(r)
    return template().render(**context(r, node))


def render_stack(r: resolve.Resolved) -> dict[str, str]:
    """Every file of one profile: {NAME: text} or {NAME/NODE: text, …} by rank."""
    if r.profile.nodes is None:
        return {r.name: render(r)}
    return {node_key(r, m): render(r, m) for m in members(r)}


def render_profile_text(root: Project | Path, name: str) -> str:
    """The compose text of profile `name` (or `name/node`) in the project at `root` (used by
    diff)."""
    project = root if isinstance(root, Project) else Project(root)
    base, _, node_name = name.partition("/")
    r = resolve.load(project, base)
    node = next((m for m in members(r) if m.name == node_name), None) if node_name else None
    if node_name and node is None:
        raise BadInput(f"{r.path}: nodes.members: no node {node_name!r}")
    return render(r, node)


def render_all(project: Project, names: list[str] | None = None) -> dict[str, str]:
    """Render every named profile (all by default) in memory first: bad input writes nothing."""
    rendered: dict[str, str] = {}
    for r in resolve.load_all(project, names):
        rendered.update(render_stack(r))
        rendered.update(monitoring_files(r))
    return rendered


def _monitoring(
    r: resolve.Resolved, node: Node | None, ctx: dict[str, Any]
) -> dict[str, Any] | None:
    """The Prometheus service of a stack (multi-node: on the head only, on its host network), or
    None."""
    m, svc = r.profile.monitoring, r.profile.service
    if not m.prometheus or (node is not None and node.rank != 0):
        return None
    # the stack's own network: the engine by its service name; published on loopback
    if node is None:
        target, listen, url = (
            f"vllm:{svc.port.container}",
            "0.0.0.0:9090",
            f"http://127.0.0.1:{m.port}",
        )
    # the head's host network: the API where the head's health probe finds it; Prometheus on
    # loopback
    else:
        bind = svc.port.bind
        host = "127.0.0.1" if bind in ("0.0.0.0", "") else ("::1" if bind == "::" else bind)
        target, listen = f"{_url_host(host)}:{svc.port.host}", f"127.0.0.1:{m.port}"
        url = f"http://{listen}"
    config = template("prometheus.yml.j2").render(
        source=r.path,
        name=r.name,
        hash=r.hash,
        node_line=ctx["node_line"],
        scrape_interval=m.scrape_interval,
        target=target,
        served_name=r.profile.model.served_name,
    )
    return {
        "image": m.image,
        "command": [
            "--config.file=/etc/prometheus/prometheus.yml",
            "--storage.tsdb.path=/prometheus",
            f"--web.listen-address={listen}",
        ],
        "port": f"127.0.0.1:{m.port}:9090",
        "listen_url": url,
        "labels": sorted(
            {f"{LABEL_PREFIX}profile": r.name, f"{LABEL_PREFIX}role": "monitoring"}.items()
        ),
        "config": config,
        "content": literal(config),  # compose interpolates `$` in a config's content, too
    }


def monitoring_files(r: resolve.Resolved) -> dict[str, str]:
    """{NAME/prometheus.yml, NAME/grafana-dashboard.json} beside the compose.yaml that runs
    Prometheus (multi-node: the head's, NAME/HEAD/…); {} when monitoring is off."""
    node = head(r)
    mon = _monitoring(r, node, context(r, node)) if r.profile.monitoring.prometheus else None
    if mon is None:
        return {}
    key = r.name if node is None else node_key(r, node)
    dashboard = template("grafana-dashboard.json.j2").render(
        name=r.name,
        uid=f"composegen-{r.name}"[:40],
        source=r.path,
        hash=r.hash,
        served_name=r.profile.model.served_name,
    )
    return {f"{key}/prometheus.yml": mon["config"], f"{key}/grafana-dashboard.json": dashboard}
