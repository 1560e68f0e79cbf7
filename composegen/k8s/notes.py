"""What the Kubernetes manifests cannot say as compose does: every such setting is a Note, never
dropped.

`unmapped`: no equivalent, not rendered. `adapted`: rendered another way. `security`: hostIPC,
hostNetwork, capabilities and hostPath, emitted only because the compose stack has the same. All
three reach the workload's header comment and `render --json`."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from composegen.profiles import resolve
from composegen.profiles.schema import Node
from composegen.render import members


@dataclass(frozen=True)
class Note:
    setting: str  # the compose setting, e.g. `ulimits.memlock`
    value: str  # its value there
    k8s: str  # what the manifests do instead (empty: nothing)


@dataclass
class Notes:
    unmapped: list[Note] = field(default_factory=list)
    adapted: list[Note] = field(default_factory=list)
    security: list[Note] = field(default_factory=list)

    def add(self, kind: str, setting: str, value: Any, k8s: str = "") -> None:
        note = Note(setting, value if isinstance(value, str) else _text(value), k8s)
        target = getattr(self, kind)
        if note not in target:
            target.append(note)


def workers_share_a_template(nodes: list[Node], notes: Notes) -> None:
    """LWS has one worker template: per-node settings of ranks past the first cannot be said."""
    first = nodes[1]
    for other in nodes[2:]:
        for what in ("environment", "gpus", "hf_cache"):
            if getattr(other, what) != getattr(first, what):
                shared = f"LWS workers share one template: {first.name}'s is rendered"
                setting = f"nodes.members.{other.name}.{what}"
                notes.add("unmapped", setting, getattr(other, what) or "-", shared)


def stack_notes(r: resolve.Resolved, notes: Notes, service: str, period: int) -> None:
    """The notes on settings of the whole stack (the pod-level ones are added as pods are built)."""
    _unmapped(r, notes)
    svc, p = r.profile.service, r.profile
    add = partial(notes.add, "adapted")
    if not p.pinned:
        add("image", p.image, f"as written, not pinned by digest: {p.image_unpinned_reason or '-'}")
    for node in members(r):
        where = node.docker_host or node.context or "the local engine"
        why = "the scheduler places pods; its environment is rendered as written (pin with a nodeSelector)"
        add(f"nodes.members.{node.name}", where, why)
    if p.nodes is not None:
        add("command.--master-addr", p.nodes.master_addr, "$(LWS_LEADER_ADDRESS), the leader pod")
    port = svc.port
    where = f"{port.bind}:{port.host}" + ("" if p.nodes else f"->{port.container}")
    add("ports", where, f"Service {service} port {port.host} (ClusterIP)")
    if p.nodes is not None and port.bind not in ("0.0.0.0", "::"):
        why = "vLLM listens there as in compose: the Service reaches it only with bind 0.0.0.0"
        add("service.port.bind", port.bind, why)
    restart = (
        "RecreateGroupOnPodRestart" if p.nodes else "Always (the only policy a Deployment allows)"
    )
    add("restart", svc.restart, f"restartPolicy {restart}")
    probe = f"startupProbe {period}s x {math.ceil(svc.startup_timeout / period)} "
    why = "(the kubelet restarts a container that misses it), readinessProbe /health"
    add("healthcheck", f"start_period {svc.startup_timeout}s", probe + why)


def _unmapped(r: resolve.Resolved, notes: Notes) -> None:
    svc, p = r.profile.service, r.profile
    add = partial(notes.add, "unmapped")
    if svc.container_name:
        add("container_name", svc.container_name, "pods are named by their workload")
    if svc.init:
        add("init", True, "no init process: vllm is the container's PID 1")
    for key, value in svc.ulimits_plain().items():
        add(
            f"ulimits.{key}", value, "Kubernetes sets no ulimits: the node runtime's defaults apply"
        )
    if svc.ipc == "shareable":
        add("ipc", "shareable", "no per-pod IPC sharing beyond the pod's own containers")
    if p.nodes is not None and p.nodes.rdma:
        rdma = ["/dev/infiniband:/dev/infiniband"]
        add("devices", rdma, "needs an RDMA device plugin resource on the nodes (not rendered)")
    if p.monitoring.prometheus:
        add("monitoring.prometheus", True, "the compose stack's Prometheus is not rendered")


def _text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value
