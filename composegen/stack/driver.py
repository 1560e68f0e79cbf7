"""The deployment seam: every command that drives a stack calls these, and nothing else in stack/.

A profile's deployment is chosen once (placement.deployment): a single-node profile is the one-node
case of the same algorithms as a multi-node one. Progress goes to a `progress.ProgressSink`.

    up(project, r, opts, sink)          preflight, start, wait, summary        -> reports.UpReport
    attach(project, r, sink, timeout)   wait for an already-starting stack     -> reports.UpReport
    down(project, r, timeout)           stop and remove, then /dev/shm         -> reports.DownReport
    status(project, name)               what runs, health, drift               -> reports.StatusReport
    logs_text(project, r, tail, node)   / follow_logs(...)                     -> str / Iterator[bytes]
    endpoint(r)                         the head's API as seen from here       -> readiness.Endpoint
    running_container(project, r)       the head's running vLLM container      -> ContainerFacts
    live_identity(ctr), startup_for(r, ctr), with_mismatches(r, report)
    shm_report(r)                       /dev/shm of every node                 -> dict
    gpu_claims(r)                       running containers' GPU requests       -> list[dict]

Only commands that need the engine import this module (render/diff/validate never do).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from composegen.errors import ComposegenError, EngineError
from composegen.profiles.resolved import Resolved
from composegen.project import Project
from composegen.stack import down as teardown
from composegen.stack import engine, loadstate, nodeshm, placement, readiness
from composegen.stack import status as stack_state
from composegen.stack import up as starting
from composegen.stack.facts import ContainerFacts
from composegen.stack.placement import Deployment, deployment
from composegen.stack.prepare import UpOptions
from composegen.stack.progress import ProgressSink
from composegen.stack.reports import DownReport, StatusReport, UpReport
from composegen.stack.up import startup_for, with_mismatches

__all__ = [
    "Deployment",
    "UpOptions",
    "attach",
    "deployment",
    "down",
    "endpoint",
    "follow_logs",
    "gpu_claims",
    "live_identity",
    "logs_text",
    "preload",
    "running_container",
    "shm_report",
    "startup_for",
    "status",
    "up",
    "with_mismatches",
]


def preload() -> None:
    """Load what driving a stack imports lazily (the docker libraries, the startup parser) up front."""
    from composegen.shm import scan  # noqa: F401
    from composegen.vllm import startup  # noqa: F401

    engine.preload()


def up(project: Project, r: Resolved, opts: UpOptions, sink: ProgressSink | None = None) -> UpReport:
    return starting.up(deployment(project, r), opts, sink or ProgressSink())


def attach(
    project: Project,
    r: Resolved,
    sink: ProgressSink | None = None,
    timeout: float | None = None,
    *,
    ready_before: bool = False,
) -> UpReport:
    return starting.attach(deployment(project, r), sink or ProgressSink(), timeout, ready_before=ready_before)


def down(project: Project, r: Resolved, timeout: int | None = None) -> DownReport:
    report = teardown.down(deployment(project, r), timeout)
    if r.profile.nodes is not None:
        report.shm = nodeshm.node_shm_report(r)
    elif r.profile.service.ipc == "host":
        from composegen.shm import scan as shm

        report.shm = shm.scan("/dev/shm", container_labels=engine.label_lookup())
    return report


def status(project: Project, name: str | None = None) -> StatusReport:
    return stack_state.stack_status(project, name)


def endpoint(r: Resolved) -> readiness.Endpoint:
    return placement.endpoint(r)


def gpu_claims(r: Resolved) -> list[tuple[placement.NodeRef, list[dict[str, Any]]]]:
    """Per node of the profile: what every running container on its engine asks of the GPUs (engine.gpu_claims)."""
    return [(n, engine.gpu_claims(n.target)) for n in placement.nodes(r)]


def shm_report(r: Resolved) -> dict[str, Any]:
    return nodeshm.node_shm_report(r)


def running_container(project: Project, r: Resolved) -> ContainerFacts:
    """The profile's running vLLM container (the head's), or EngineError (exit 3)."""
    head = placement.nodes(r)[0]
    ctr = placement.vllm_container(engine.project_containers(head.project, head.target))
    if ctr is None or not ctr.running:
        state = "is not running" if ctr is None else f"is {ctr.state}"
        up = loadstate.up_hint(r.name, ctr.emulated if ctr else deployment(project, r).override_path(head).is_file())
        raise EngineError(f"{r.name} {state}", hint=f"{up} first (`composegen status` lists what runs)")
    loadstate.raise_if_loading(r.name, ctr, placement.endpoint(r), r.profile.service.startup_timeout)
    return ctr


def live_identity(ctr: ContainerFacts) -> dict[str, Any]:
    """What the running container really is: the profile hash it was started from, its image, emulated or not."""
    image = engine.image_facts(ctr.image_id, ctr.target)
    return {
        "hash": ctr.profile_hash,
        "image_id": ctr.image_id,
        "repo_digests": list(image.repo_digests) if image else [],
        "emulated": ctr.emulated,
    }


def logs_text(project: Project, r: Resolved, tail: int | str = "all", node: str | None = None) -> str:
    """The stack's logs: the container's own for a single-node stack; for a multi-node stack every node's
    (or one's), each under a `==> node NAME (rank R, role, engine) <==` header."""
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


def follow_logs(project: Project, r: Resolved, tail: int | str = "all", node: str | None = None) -> Iterator[bytes]:
    """Follow one container's log (default: the head's) until it stops."""
    dep = deployment(project, r)
    return engine.follow_logs(_container(dep, dep.node(node)), tail)


def _container(dep: Deployment, n: placement.NodeRef) -> ContainerFacts:
    ctr = placement.vllm_container(engine.project_containers(n.project, n.target))
    if ctr is None:
        where = f" on {n.label}" if n.member else " on this engine"
        up = loadstate.up_hint(dep.name, dep.override_path(dep.head).is_file())  # the override: it was emulated
        raise EngineError(f"{dep.name} has no container{where}", hint=f"{up} first")
    return ctr
