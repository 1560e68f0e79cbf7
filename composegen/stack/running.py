"""The running side of a stack: which container is its head, the head refused while it is down or
still loading, what that container really is, and every node's logs. The driver re-exports these
(its door); the sleep-mode operations there find the head through them."""

from __future__ import annotations

from collections.abc import Iterator

from composegen.errors import ComposegenError, EngineError
from composegen.profiles.resolved import Resolved
from composegen.project import Project
from composegen.stack import engine, loadstate, placement
from composegen.stack.facts import ContainerFacts
from composegen.stack.placement import Deployment, deployment
from composegen.stack.reports import LiveIdentity


def head_container(project: Project, r: Resolved) -> ContainerFacts | None:
    """The head's vLLM container in whatever state it is (None when there is none)."""
    head = placement.nodes(r)[0]
    return placement.vllm_container(engine.project_containers(head.project, head.target))


def container_log(ctr: ContainerFacts) -> str:
    return engine.logs(ctr)


def running_container(project: Project, r: Resolved) -> ContainerFacts:
    """The profile's running vLLM container (the head's), or EngineError (exit 3)."""
    head = placement.nodes(r)[0]
    ctr = head_container(project, r)
    if ctr is None or not ctr.running:
        state = "is not running" if ctr is None else f"is {ctr.state}"
        emulated = ctr.emulated if ctr else deployment(project, r).override_path(head).is_file()
        up = loadstate.up_hint(r.name, emulated)
        raise EngineError(
            f"{r.name} {state}", hint=f"{up} first (`composegen status` lists what runs)"
        )
    timeout = r.profile.service.startup_timeout
    loadstate.raise_if_loading(r.name, ctr, placement.endpoint(r), timeout)
    return ctr


def live_identity(ctr: ContainerFacts) -> LiveIdentity:
    """What the running container is: the profile hash it started from, its image, emulated."""
    image = engine.image_facts(ctr.image_id, ctr.target)
    return LiveIdentity(
        hash=ctr.profile_hash,
        image_id=ctr.image_id,
        repo_digests=list(image.repo_digests) if image else [],
        emulated=ctr.emulated,
    )


def logs_text(
    project: Project, r: Resolved, tail: int | str = "all", node: str | None = None
) -> str:
    """The stack's logs: the container's own for a single-node stack; for a multi-node stack every
    node's (or one's), each under a `==> node NAME (rank R, role, engine) <==` header."""
    dep = deployment(project, r)
    if not dep.multi:
        return engine.logs(_container(dep, dep.head), tail)
    parts = []
    for n in [dep.node(node)] if node else dep.nodes:
        try:
            ctr = placement.vllm_container(engine.project_containers(n.project, n.target))
            text = engine.logs(ctr, tail) if ctr is not None else "(no container)\n"
        except ComposegenError as exc:
            text = f"(unreachable: {exc.message})\n"
        parts.append(f"==> {n.label} <==\n{text}")
    return "\n".join(parts)


def follow_logs(
    project: Project, r: Resolved, tail: int | str = "all", node: str | None = None
) -> Iterator[bytes]:
    """Follow one container's log (default: the head's) until it stops."""
    dep = deployment(project, r)
    return engine.follow_logs(_container(dep, dep.node(node)), tail)


def _container(dep: Deployment, n: placement.NodeRef) -> ContainerFacts:
    ctr = placement.vllm_container(engine.project_containers(n.project, n.target))
    if ctr is None:
        where = f" on {n.label}" if n.member else " on this engine"
        # the override: it was emulated
        up = loadstate.up_hint(dep.name, dep.override_path(dep.head).is_file())
        raise EngineError(f"{dep.name} has no container{where}", hint=f"{up} first")
    return ctr
