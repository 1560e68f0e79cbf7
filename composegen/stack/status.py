"""`composegen status`: what runs, whether it answers, and whether it is what the profile says now
(`composegen schema --report status`).

A profile asked for by name is asked on every node of its deployment (one node for a single-node
profile); without a name, every composegen stack the local engine shows (containers by their
io.composegen.profile label, and compose networks of `composegen-*` projects whose containers are
gone). A node that cannot be reached shows as a container row with state "unreachable" (name null),
a multi-node node with no container as "missing".

drift: in-sync only when the running container's hash label equals both out/'s header hash and the
hash the profile resolves to now; otherwise drifted, `newer` saying which side moved (out, running,
or profile: the profile changed, or was reverted, while out/ still matches what runs)."""

from __future__ import annotations

import re
import time
from typing import Literal, TypedDict

from composegen.errors import BadInput, ComposegenError
from composegen.output import table
from composegen.profiles import resolve
from composegen.profiles.resolved import Resolved
from composegen.project import Project, compose_project
from composegen.stack import engine, loadstate, placement, readiness, sleepmode
from composegen.stack.facts import ContainerFacts
from composegen.stack.placement import Deployment, NodeRef
from composegen.stack.reports import (
    ContainerStatus,
    Drift,
    EndpointStatus,
    NodeStatus,
    SleepingStatus,
    StackStatus,
    StatusReport,
)

_HEADER_HASH = re.compile(r"^# profile: \S+  hash: ([0-9a-f]+)$", re.M)


def out_hash(project: Project, key: str) -> str | None:
    path = project.out_path(key)
    if not path.is_file():
        return None
    m = _HEADER_HASH.search(path.read_text(encoding="utf-8")[:400])
    return m.group(1) if m else None


def drift(project: Project, key: str, profile_hash: str | None, ctr: ContainerFacts) -> Drift:
    running, current = ctr.profile_hash, out_hash(project, key)
    if current is None:
        return Drift(state="unknown", running=running, out=None, profile=profile_hash)
    if current != running:
        out_mtime = project.out_path(key).stat().st_mtime
        newer: Literal["out", "running"] = (
            "out" if ctr.started_at is None or out_mtime > ctr.started_at else "running"
        )
        return Drift(
            state="drifted", running=running, out=current, newer=newer, profile=profile_hash
        )
    if profile_hash is not None and profile_hash != running:
        return Drift(
            state="drifted", running=running, out=current, newer="profile", profile=profile_hash
        )
    return Drift(state="in-sync", running=running, out=current, profile=profile_hash)


def stack_status(project: Project, name: str | None = None, every: bool = False) -> StatusReport:
    """NAME's stack, or this project's (EVERY: every composegen stack on the engine, any copy's)."""
    mine = resolve.prefix(project)
    groups: dict[tuple[str, str], list[ContainerFacts]] = {(name, ""): []} if name else {}
    if name is None:
        found, root = engine.composegen_containers(), f"{project.root.resolve()}/"
        for ctr in found:  # ours: started from a compose file under the root (compose's label)
            files = ctr.labels.get("com.docker.compose.project.config_files", root)
            if every or any(f.startswith(root) for f in files.split(",")):
                other = "" if _ours(ctr, mine) else ctr.project or "?"
                groups.setdefault((ctr.profile or "?", other), []).append(ctr)
        scopes = {mine, "composegen"} | {(c.project or "").split("-")[0] for c in found}
        held = {c.project for c in found}  # below: stacks whose containers are gone
        for owner in {n.project or "?" for n in engine.composegen_networks()} - held:
            if (guess := _profile_of_project(project, owner)) != owner:
                groups.setdefault((guess, ""), [])
            elif every and owner.split("-")[0] in scopes:
                groups.setdefault((owner, owner), [])
    stacks = []
    for (profile, other), ctrs in sorted(groups.items()):
        r = None if other else _load(project, profile)
        if r is None and name is not None:
            ctrs = [
                c for c in engine.composegen_containers() if c.profile == name and _ours(c, mine)
            ]
        entry = (
            deployment_status(placement.deployment(project, r))
            if r
            else _label_status(project, profile, ctrs)
        )
        if entry is not None:
            stacks.append(entry)
    return StatusReport(stacks=stacks, project=str(project.root.resolve()))


def _ours(ctr: ContainerFacts, prefix: str) -> bool:  # this copy's stack of its profile
    return ctr.project == compose_project(ctr.profile or "", ctr.node, prefix)


def _load(project: Project, name: str) -> Resolved | None:
    if not project.profile_path(name).is_file():
        return None
    try:
        return resolve.load(project, name)
    except BadInput:
        return None  # a broken profile: what the engine shows, from the containers' own labels


def _profile_of_project(project: Project, compose_project: str) -> str:
    guess = compose_project.removeprefix(f"{resolve.prefix(project)}-")
    return guess if project.profile_path(guess).is_file() else compose_project


def deployment_status(dep: Deployment) -> StackStatus | None:
    """One stack, asked on every node's engine; None for a single-node stack with nothing on the
    engine."""
    containers: list[ContainerStatus] = []
    nodes: list[NodeStatus] = []
    networks: list[str] = []
    head: ContainerFacts | None = None
    for n in dep.nodes:
        info = NodeStatus.of(n)
        try:
            ctrs = [
                c for c in engine.project_containers(n.project, n.target) if c.service == "vllm"
            ]
            networks += [x.name for x in engine.project_networks(n.project, n.target)]
        except ComposegenError as exc:
            info.reachable, info.error = False, exc.message
            containers.append(_placeholder("unreachable", n))
            nodes.append(info)
            continue
        containers += [_container(c, n) for c in ctrs] or (
            [_placeholder("missing", n)] if dep.multi else []
        )
        if ctrs:
            info.drift = drift(dep.project, n.key, dep.r.hash, ctrs[0])
            head = ctrs[0] if n == dep.head else head
        nodes.append(info)
    if not dep.multi and not containers and not networks:
        return None
    p = dep.r.profile
    drifts = [x.drift for x in nodes if x.drift]
    overall = next((d for d in drifts if d.state == "drifted"), drifts[0] if drifts else None)
    ep = dep.endpoint()
    # what the container publishes, even if drifted
    if head is not None and head.host_port and not dep.multi:
        ep = readiness.Endpoint(ep.host, head.host_port, ep.api_key)
    return StackStatus(
        profile=dep.name,
        project=dep.head.project,
        containers=containers,
        endpoint=_asleep(
            dep, head, _endpoint(ep, head, p.model.served_name, p.service.startup_timeout)
        ),
        drift=overall or Drift(state="unknown", running=None, out=None, profile=dep.r.hash),
        nodes=nodes if dep.multi else None,
        networks=networks,
        image_policy=p.image_policy,
        unsafe_mounts=[f"{m.source}: {m.reason}" for m in p.service.unsafe_mounts],
    )


def _asleep(dep: Deployment, head: ContainerFacts | None, ep: EndpointStatus) -> EndpointStatus:
    """A standby stack's engine asleep answers /health and lists its model, but serves nothing: not
    ready."""
    if head is None or dep.r.profile.standby is None or not ep.healthy:
        return ep
    found = sleepmode.state(dep.project, dep.r, head)
    if found is None:
        return ep
    held = SleepingStatus(level=found.level, since=found.since, gpu_gib_held=found.residue_gib)
    return ep.model_copy(update={"sleeping": held, "ready": False})


def _label_status(project: Project, profile: str, ctrs: list[ContainerFacts]) -> StackStatus | None:
    """A stack whose profile is gone or broken: what its containers' labels say."""
    mine = resolve.prefix(project)  # of this project's compose projects (its scope)
    projects = {c.project for c in ctrs} or {profile, f"{mine}-{profile}"}
    networks = [x.name for x in engine.composegen_networks() if x.project in projects]
    if not ctrs and not networks:
        return None
    head = ctrs[0] if ctrs else None
    ep = readiness.Endpoint("127.0.0.1", head.host_port) if head and head.host_port else None
    return StackStatus(
        profile=profile,
        project=head.project if head else profile,
        containers=[_container(c, None) for c in ctrs],
        endpoint=_endpoint(ep, head, head.served_name if head else None),
        drift=drift(project, profile, None, head)
        if head and _ours(head, mine)
        else Drift(state="unknown", running=None, out=None),
        networks=networks,
    )


def _endpoint(
    ep: readiness.Endpoint | None,
    head: ContainerFacts | None,
    served: str | None,
    timeout: float | None = None,
) -> EndpointStatus:
    if ep is None or head is None or not head.running:
        return EndpointStatus()
    try:
        model = readiness.models_entry(ep, served or "")
    # status reports what it sees; a keyed API without our key lists nothing
    except readiness.Unauthorized:
        model = None
    healthy = readiness.health_ok(ep)
    return EndpointStatus(
        url=ep.base_url,
        healthy=healthy,
        served_name=model.id if model else None,
        max_model_len=model.max_model_len if model else None,
        ready=bool(healthy and model),
        loading=loadstate.loading_state(head, healthy, timeout),  # the stage, read from the log
    )


def _container(c: ContainerFacts, n: NodeRef | None) -> ContainerStatus:
    return ContainerStatus(
        name=c.name,
        state=c.state,
        health=c.health,
        restarts=c.restarts,
        exit_code=c.exit_code,
        uptime_s=round(time.time() - c.started_at, 1) if c.started_at and c.running else None,
        emulated=c.emulated,
        **_where(n),
    )


def _placeholder(state: str, n: NodeRef) -> ContainerStatus:
    return ContainerStatus(name=None, state=state, **_where(n))


class _Where(TypedDict, total=False):
    """A container's node, for a multi-node stack's rows (empty for a single-node stack's)."""

    node: str | None
    rank: int
    engine: str


def _where(n: NodeRef | None) -> _Where:
    if n is None or not n.member:
        return _Where()
    return _Where(node=n.name, rank=n.rank, engine=n.target.label)


# Left out first to last when a terminal is narrower than the table (profile, state and API stay).
NARROW_DROP = (
    "RESTARTS",
    "UPTIME",
    "MAX_LEN",
    "DRIFT",
    "HEALTH",
    "CONTAINER",
    "NODE",
    "MODEL",
    "ENDPOINT",
)


def format_text(report: StatusReport, width: int | None = None) -> str:
    """The table (every column when `width` is None: piped; else only what fits, see
    output.table)."""
    if not report.stacks:
        return "no stacks of this project on this engine (`composegen status --all`: every project's)\n"
    rows, notes = [], []
    multi = any(s.nodes is not None for s in report.stacks)
    for s in report.stacks:
        rows += [_row(s, c, multi) for c in s.containers]
        notes += [
            f"{s.profile}: node {n.name} ({n.engine}) unreachable: {n.error}"
            for n in s.nodes or []
            if not n.reachable
        ]
        notes += [f"{s.profile}: unsafe mount (service.unsafe_mounts) {m}" for m in s.unsafe_mounts]
        if s.image_policy != "pinned":
            unpinned = f"image not pinned by digest (image_policy: {s.image_policy})"
            notes.append(f"{s.profile}: {unpinned}")
        if s.networks and not any(c.name for c in s.containers):
            notes.append(
                f"{s.profile}: network {', '.join(s.networks)} left without its containers; "
                f"`composegen down {s.profile}` removes it"
            )
    header = ["PROFILE", *(["NODE"] if multi else []), "CONTAINER", "STATE", "HEALTH", "RESTARTS"]
    header += ["UPTIME", "ENDPOINT", "MODEL", "API", "MAX_LEN", "DRIFT"]
    shown = table(rows, header, width=width, drop=NARROW_DROP) if rows else ""
    return shown + "".join(f"{n}\n" for n in notes)


def _row(s: StackStatus, c: ContainerStatus, multi: bool) -> list[str]:
    ep, d = s.endpoint, s.drift
    # never "unhealthy" while it loads
    api = loadstate.api_text(ep.healthy, ep.served_name, ep.loading)
    asleep = ep.sleeping
    if asleep is not None:
        held = f", {asleep.gpu_gib_held:g} GiB held" if asleep.gpu_gib_held is not None else ""
        since = f" since {asleep.since}" if asleep.since else ""
        api = f"asleep L{asleep.level}{held}{since}"
    drift_text = d.state if d.state != "drifted" else f"drifted ({d.newer} is newer)"
    node = [f"{c.node} (rank {c.rank})" if c.node is not None else "-"] if multi else []
    return [
        s.profile + (" (emulated)" if c.emulated else ""),
        *node,
        c.name or "-",
        c.state,
        "asleep" if asleep is not None else loadstate.health_text(c.health, bool(ep.ready)),
        str(c.restarts),
        f"{c.uptime_s:.0f}s" if c.uptime_s is not None else "-",
        (ep.url or "-").removeprefix("http://"),
        ep.served_name or "-",  # the name /v1/models serves (what a client passes as `model`)
        api,
        str(ep.max_model_len or "-"),
        drift_text,
    ]
