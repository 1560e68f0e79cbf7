"""Where a profile's stack runs: its nodes, chosen once per profile. A single-node profile is ONE
node (rank 0, the head, on the default engine, out/NAME, project composegen-NAME); a multi-node
profile is its `nodes.members` by rank, each with out/NAME/NODE, project composegen-NAME-NODE and
its own engine (`docker_host` URL or `context`; neither = the default engine). Every stack algorithm
(up, down, status, logs, shm, endpoint) walks `Deployment.nodes` and never asks which kind it has.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from composegen import render
from composegen.errors import BadInput
from composegen.profiles.resolved import Resolved
from composegen.profiles.schema import Node
from composegen.project import Project
from composegen.stack import compose, engine, readiness
from composegen.stack import emulate as emulation
from composegen.stack.facts import ContainerFacts
from composegen.stack.targets import DEFAULT, Target

_REF = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)")


@dataclass(frozen=True)
class NodeRef:
    """One node of a deployment and where it runs; `member` is None for a single-node profile."""

    # a pydantic model holding dicts: not hashable; key names it
    member: Node | None = field(compare=False)
    target: Target
    key: str  # out/ key: NAME or NAME/NODE
    project: str  # compose project: composegen-NAME or composegen-NAME-NODE

    @property
    def name(self) -> str | None:
        return self.member.name if self.member else None

    @property
    def rank(self) -> int:
        return self.member.rank if self.member else 0

    @property
    def role(self) -> Literal["head", "worker"]:
        return "head" if self.rank == 0 else "worker"

    @property
    def kind(self) -> Literal["single", "head", "worker"]:
        """The node's part: "single" for the one node of a single-node stack (`top` says it)."""
        return self.role if self.member else "single"

    @property
    def label(self) -> str:
        """How messages name the node ("" for the one node of a single-node stack)."""
        where = f"rank {self.rank}, {self.role}, {self.target.label}"
        return f"node {self.name} ({where})" if self.member else ""

    def named(self, what: str) -> str:
        """A check's name on this node: `n1/ports`, or plain `ports` for a single-node stack."""
        return f"{self.name}/{what}" if self.member else what

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "rank": self.rank,
            "role": self.role,
            "engine": self.target.label,
            "project": self.project,
        }


@dataclass(frozen=True)
class Deployment:
    project: Project
    r: Resolved
    nodes: tuple[NodeRef, ...]  # head first

    @property
    def multi(self) -> bool:
        return self.r.profile.nodes is not None

    @property
    def head(self) -> NodeRef:
        return self.nodes[0]

    @property
    def name(self) -> str:
        return self.r.name

    def node(self, name: str | None = None) -> NodeRef:
        """A node by name (None: the head); BadInput naming the nodes there are."""
        if name is None:
            return self.head
        if not self.multi:
            raise BadInput(f"--node {name}: {self.name} is not a multi-node profile")
        for n in self.nodes:
            if n.name == name:
                return n
        known = ", ".join(str(n.name) for n in self.nodes)
        raise BadInput(f"{self.r.path}: nodes.members: no node {name!r} (nodes: {known})")

    def override_path(self, n: NodeRef) -> Path:
        return emulation.override_path(self.project, self.name, n.name)

    def stack(self, n: NodeRef, emulated: bool | None = None) -> compose.Stack:
        """The node's compose stack; `emulated` None = as the running stack was started (its
        label)."""
        files = [self.project.out_path(n.key)]
        override = self.override_path(n)
        if emulated is None:  # later commands (down, logs) must name the same files `up` used
            emulated = override.is_file() and any(
                c.emulated for c in engine.project_containers(n.project, n.target)
            )
        if emulated:
            files.append(override)
        if self.behind_edge:
            files.append(edge_override_path(self.project, self.name))
        return compose.Stack(n.project, files, n.target)

    @property
    def edge_network(self) -> str | None:
        """The edge's network named in the stack's override (our own generated file), if any."""
        if not self.behind_edge:
            return None
        override = edge_override_path(self.project, self.name).read_text("utf-8")
        names = re.findall(r'^    name: "([^"]+)"$', override, re.M)
        return names[-1] if names else None

    @property
    def behind_edge(self) -> bool:
        """out/edge/stacks/NAME.yaml exists: the stack joins the edge's network and publishes no
        port."""
        return not self.multi and edge_override_path(self.project, self.name).is_file()

    def endpoint(self) -> readiness.Endpoint:
        return endpoint(self.r, self.head)


def edge_override_path(project: Project, name: str) -> Path:
    """The override `composegen render` writes for a stack listed in edge.yaml
    (composegen/edge/render.py)."""
    return project.out_dir / "edge" / "stacks" / f"{name}.yaml"


def deployment(project: Project, r: Resolved) -> Deployment:
    return Deployment(project, r, nodes(r))


def nodes(r: Resolved) -> tuple[NodeRef, ...]:
    """The nodes of a profile, head first: one on the default engine for a single-node profile."""
    if r.profile.nodes is None:
        return (NodeRef(None, DEFAULT, r.name, render.project_name(r)),)
    return tuple(
        NodeRef(
            m, Target(m.docker_host, m.context), render.node_key(r, m), render.project_name(r, m)
        )
        for m in r.profile.nodes.by_rank
    )


def endpoint(r: Resolved, head: NodeRef | None = None) -> readiness.Endpoint:
    """The head's API as seen from here (a multi-node head listens on its host's network)."""
    p, head = r.profile.service.port, head or nodes(r)[0]
    host = p.bind
    if p.bind in ("0.0.0.0", "::", ""):
        loopback = "::1" if p.bind == "::" else "127.0.0.1"
        url = "" if head.target.is_local else engine.target_url(head.target) or ""
        host = urlsplit(url).hostname or loopback
    return readiness.Endpoint(host, p.host, api_key(r))


def api_key(r: Resolved) -> str | None:
    """The stack's API key, read from our environment where the profile references it."""
    value = r.profile.service.environment.get("VLLM_API_KEY")
    if isinstance(value, str):
        m = _REF.match(value)
        return os.environ.get(m.group(1)) if m else None
    return None


def vllm_container(containers: list[ContainerFacts]) -> ContainerFacts | None:
    return next((c for c in containers if c.service == "vllm"), None)
