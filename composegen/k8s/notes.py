"""What the Kubernetes manifests cannot say as compose does: every such setting is a Note, never
dropped.

`unmapped`: no equivalent, not rendered. `adapted`: rendered another way. `security`: hostIPC,
hostNetwork, capabilities and hostPath, emitted only because the compose stack has the same. All
three reach the workload's header comment and `render --json`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
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
    """LWS has one worker template: per-node settings of ranks past the first worker cannot be
    said."""
    first = nodes[1]
    for other in nodes[2:]:
        for what in ("environment", "gpus", "hf_cache"):
            if getattr(other, what) != getattr(first, what):
                notes.add(
                    "unmapped",
                    f"nodes.members.{other.name}.{what}",
                    getattr(other, what) or "-",
                    f"LWS workers share one template: {first.name}'s is rendered",
                )


def stack_notes(r: resolve.Resolved, notes: Notes, service: str, period: int) -> None:
    """The notes on settings of the whole stack (the pod-level ones are added as the pods are
    built)."""
    svc, p = r.profile.service, r.profile
    if not p.pinned:
        notes.add(
            "adapted",
            "image",
            p.image,
            f"as written, not pinned by digest: {p.image_unpinned_reason or '-'}",
        )
    if svc.container_name:
        notes.add(
            "unmapped", "container_name", svc.container_name, "pods are named by their workload"
        )
    if svc.init:
        notes.add("unmapped", "init", True, "no init process: vllm is the container's PID 1")
    for key, value in svc.ulimits_plain().items():
        notes.add(
            "unmapped",
            f"ulimits.{key}",
            value,
            "Kubernetes sets no ulimits: the node runtime's defaults apply",
        )
    if svc.ipc == "shareable":
        notes.add(
            "unmapped", "ipc", "shareable", "no per-pod IPC sharing beyond the pod's own containers"
        )
    if p.nodes is not None and p.nodes.rdma:
        notes.add(
            "unmapped",
            "devices",
            ["/dev/infiniband:/dev/infiniband"],
            "needs an RDMA device plugin resource on the nodes (not rendered)",
        )
    for node in members(r):
        where = node.docker_host or node.context or "the local engine"
        notes.add(
            "adapted",
            f"nodes.members.{node.name}",
            where,
            "the scheduler places pods; its environment is rendered as written (pin with a nodeSelector)",
        )
    if p.nodes is not None:
        notes.add(
            "adapted",
            "command.--master-addr",
            p.nodes.master_addr,
            "$(LWS_LEADER_ADDRESS), the leader pod",
        )
    port = svc.port
    where = f"{port.bind}:{port.host}" + ("" if p.nodes else f"->{port.container}")
    notes.add("adapted", "ports", where, f"Service {service} port {port.host} (ClusterIP)")
    if p.nodes is not None and port.bind not in ("0.0.0.0", "::"):
        notes.add(
            "adapted",
            "service.port.bind",
            port.bind,
            "vLLM listens there as in compose: the Service reaches it only with bind 0.0.0.0",
        )
    restart = (
        "RecreateGroupOnPodRestart" if p.nodes else "Always (the only policy a Deployment allows)"
    )
    notes.add("adapted", "restart", svc.restart, f"restartPolicy {restart}")
    notes.add(
        "adapted",
        "healthcheck",
        f"start_period {svc.startup_timeout}s",
        f"startupProbe {period}s x {math.ceil(svc.startup_timeout / period)} "
        "(the kubelet restarts a container that misses it), readinessProbe /health",
    )
    if p.monitoring.prometheus:
        notes.add(
            "unmapped",
            "monitoring.prometheus",
            True,
            "the compose stack's Prometheus is not rendered",
        )


def _text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value
