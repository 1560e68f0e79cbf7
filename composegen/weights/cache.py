"""Where a stack's weights live on the host: the Hugging Face cache it mounts, or its `model.path`
directory.

The container looks for the hub cache at HF_HUB_CACHE, else HF_HOME/hub, else
/root/.cache/huggingface/hub (vLLM images run as root). That container path is mapped back to the
host through the profile's bind mounts (a node's `hf_cache` replaces the source of the HF cache
mount), interpolating `${VAR:-default}` and `~` the way docker compose does with composegen's own
environment, which is the one compose runs with."""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from composegen.errors import BadInput
from composegen.profiles.resolved import Resolved
from composegen.profiles.rules import HF_CACHE_TARGET
from composegen.profiles.schema import Node

_VAR = re.compile(
    r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*)|(:?\?)[^}]*)?\}|\$([A-Za-z_][A-Za-z0-9_]*)"
)


@dataclass(frozen=True)
class Location:
    """The host directory to check and how the container sees it."""

    kind: str  # "hub" (a Hugging Face hub cache) or "path" (model.path: a plain directory)
    # hub cache root (kind hub) or the model directory (kind path), on the node's host
    host_dir: str
    container_dir: str
    model_id: str
    revision: str

    @property
    def repo_dir(self) -> str:
        return posixpath.join(self.host_dir, "models--" + self.model_id.replace("/", "--"))

    @property
    def snapshot(self) -> str:
        """The directory that must hold the files."""
        if self.kind == "path":
            return self.host_dir
        return posixpath.join(self.repo_dir, "snapshots", self.revision)

    @property
    def blobs(self) -> str | None:
        return posixpath.join(self.repo_dir, "blobs") if self.kind == "hub" else None


def interpolate(text: str, environ: Mapping[str, str] | None = None) -> str:
    """`${VAR}`, `${VAR:-default}`, `${VAR-default}`, `$VAR` as compose reads them; `${VAR:?msg}`
    unset is an error."""
    env: Mapping[str, str] = os.environ if environ is None else environ

    def sub(m: re.Match) -> str:
        name = m.group(1) or m.group(5)
        value = env.get(name)
        op, default, required = m.group(2), m.group(3), m.group(4)
        if op == ":-" and not value:
            return default or ""
        if op == "-" and value is None:
            return default or ""
        if required and (value is None or (required == ":?" and not value)):
            raise BadInput(f"${{{name}}} is required by a volume source and is not set")
        return value or ""

    return _VAR.sub(sub, text)


def container_hub_cache(env: Mapping[str, object]) -> str:
    """The hub cache path in the container, from the service's environment (literals only)."""

    def literal(key: str) -> str | None:
        value = env.get(key)
        return str(value) if value is not None and "$" not in str(value) else None

    if literal("HF_HUB_CACHE"):
        return str(literal("HF_HUB_CACHE"))
    if literal("HF_HOME"):
        return posixpath.join(str(literal("HF_HOME")), "hub")
    return posixpath.join(HF_CACHE_TARGET, "hub")


def mounts(r: Resolved, node: Node | None = None) -> dict[str, str]:
    """Container target → host source (as written) of every volume, node overrides applied."""
    found = {v.target: v.source for v in r.profile.service.volumes}
    if node is not None and node.hf_cache:
        found[HF_CACHE_TARGET] = node.hf_cache
    return found


def host_path(r: Resolved, container_path: str, node: Node | None, relative_to: Path) -> str | None:
    """The host path behind a container path (longest mount target that contains it), or None when
    no bind mount covers it. A named volume is refused: its data lives inside the engine."""
    best = None
    for target, source in mounts(r, node).items():
        target = target.rstrip("/") or "/"
        inside = container_path == target or container_path.startswith(target.rstrip("/") + "/")
        if inside and (best is None or len(target) > len(best[0])):
            best = (target, source)
    if best is None:
        return None
    target, source = best
    if not source.startswith(("/", ".", "~", "$")):
        raise BadInput(
            f"{r.path}: service.volumes: {container_path} is on the named volume {source!r}; "
            "weights checks need a host directory (mount one, e.g. ${HF_HOME:-~/.cache/huggingface})"
        )
    src = os.path.expanduser(interpolate(source))
    if not posixpath.isabs(src):
        # compose: relative to the file's dir
        src = posixpath.normpath(posixpath.join(str(relative_to), src))
    rest = container_path[len(target) :].lstrip("/")
    return posixpath.join(src, rest) if rest else src


def locate(r: Resolved, node: Node | None = None, compose_dir: Path | None = None) -> Location:
    """Where this profile's (node's) weights are on its host; BadInput if nothing mounts them."""
    model, svc = r.profile.model, r.profile.service
    env = {**svc.environment, **(node.environment if node is not None else {})}
    base = compose_dir or Path(".")
    if model.path:
        found = host_path(r, model.path, node, base)
        if found is None:
            raise BadInput(
                f"{r.path}: model.path: {model.path} is not inside any mounted volume (service.volumes), "
                "so the container would not see the weights"
            )
        return Location("path", found, model.path, model.id, model.revision)
    inside = container_hub_cache(env)
    found = host_path(r, inside, node, base)
    if found is None:
        raise BadInput(
            f"{r.path}: service.volumes: nothing mounts the container's Hugging Face cache ({inside}); every start "
            "would download the weights into the container",
            hint=f"mount it: volumes: [{{source: ${{HF_HOME:-~/.cache/huggingface}}, target: {HF_CACHE_TARGET}}}]",
        )
    return Location("hub", found, inside, model.id, model.revision)
