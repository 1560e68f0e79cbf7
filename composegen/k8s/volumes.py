"""A pod's volumes from the compose mounts: the Hugging Face cache (a claim or a hostPath), the other
mounts, /dev/shm as a memory emptyDir, and the compile caches' claim (docs/caches.md)."""

from __future__ import annotations

from typing import Any

from composegen.k8s.notes import Notes
from composegen.k8s.resources import DEFAULT_CLAIM, quantity
from composegen.profiles import caches, resolve
from composegen.profiles.kubernetes import K8S_NAME_RE
from composegen.profiles.schema import Node
from composegen.units import parse_bytes
from composegen.weights import cache

SHM_VOLUME, HF_VOLUME = "dshm", "hf-cache"


def pod_volumes(
    r: resolve.Resolved, node: Node | None, notes: Notes
) -> tuple[list[dict], list[dict], str | None]:
    """Pod volumes, the vLLM container's mounts, and the snapshot path the init container checks."""
    svc, model = r.profile.service, r.profile.model
    read_only = {v.target: v.read_only for v in svc.volumes}
    sources = cache.mounts(r, node)
    env = {**svc.environment, **(node.environment if node is not None else {})}
    weights = model.path or cache.container_hub_cache(env)
    covering = [t for t in sources if weights == t or weights.startswith(t.rstrip("/") + "/")]
    hf_target = max(covering, key=len) if covering else None
    volumes: list[dict] = []
    mounts: list[dict] = []
    for index, (target, source) in enumerate(sorted(sources.items())):
        ro = read_only.get(target, False)
        if target == hf_target:
            vol: dict[str, Any] | None = {"name": HF_VOLUME, **_hf_source(r, source, ro, notes)}
        else:
            vol = _data_volume(index, target, source, notes)
        if vol is not None:
            volumes.append(vol)
            mounts.append(
                {"name": vol["name"], "mountPath": target, **({"readOnly": True} if ro else {})}
            )
    for vol, mount in (_shm_volume(r, notes), _cache_volume(r, notes)):
        if vol is not None:
            volumes.append(vol)
            mounts.append(mount)
    if hf_target is None:
        unmapped = "no volume holds the Hugging Face cache: no init container"
        notes.add("unmapped", "weights", weights, unmapped)
        return volumes, mounts, None
    if model.path:
        return volumes, mounts, model.path
    snapshot = f"{weights}/models--{model.id.replace('/', '--')}/snapshots/{model.revision}"
    return volumes, mounts, snapshot


def _data_volume(index: int, target: str, source: str, notes: Notes) -> dict[str, Any] | None:
    """A compose mount other than the Hugging Face cache as a pod volume (None: not mountable)."""
    setting = f"volumes.{target}"
    if source.startswith("/"):
        notes.add("security", setting, source, f"hostPath {source} (compose: a bind mount)")
        return {"name": f"data-{index}", "hostPath": {"path": source, "type": "DirectoryOrCreate"}}
    if not source.startswith((".", "~", "$")):
        notes.add("adapted", setting, source, "emptyDir: kept across container restarts, not pods")
        name = source if K8S_NAME_RE.fullmatch(source) else f"data-{index}"
        return {"name": name, "emptyDir": {}}
    notes.add("unmapped", f"volumes.{target}", source, "a path on the compose host: not mounted")
    return None


def _shm_volume(r: resolve.Resolved, notes: Notes) -> tuple[dict | None, dict]:
    svc = r.profile.service
    if not svc.shm_size:
        return None, {}
    size = parse_bytes(svc.shm_size) or 0
    if svc.ipc == "host":
        adapted = (
            f"/dev/shm: memory emptyDir {quantity(size)} (compose with ipc: host shares the host's)"
        )
        notes.add("adapted", "shm_size", svc.shm_size, adapted)
    vol = {"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": quantity(size)}}
    return vol, {"name": SHM_VOLUME, "mountPath": "/dev/shm"}


def _cache_volume(r: resolve.Resolved, notes: Notes) -> tuple[dict | None, dict]:
    """The compile caches: the claim named by their key; a project directory has no pod form."""
    name = caches.volume(r)
    if name is None:
        if r.profile.caches != "off":
            notes.add("unmapped", "caches", r.profile.caches, "a project directory: not mounted")
        return None, {}
    vol = {"name": caches.MOUNTED, "persistentVolumeClaim": {"claimName": name}}
    return vol, {"name": caches.MOUNTED, "mountPath": caches.CACHE_TARGET}


def _hf_source(r: resolve.Resolved, compose_source: str, read_only: bool, notes: Notes) -> dict:
    chosen, setting = r.profile.kubernetes.hf_cache, "volumes.hf-cache"
    claim = chosen.claim if chosen is not None else None
    if not claim:
        bind = compose_source if compose_source.startswith("/") else None
        path = chosen.host_path if chosen is not None else bind
        if path is not None:
            notes.add(
                "security", setting, compose_source, f"hostPath {path} (the Hugging Face cache)"
            )
            return {"hostPath": {"path": path, "type": "Directory"}}
        notes.add("adapted", setting, compose_source, f"persistentVolumeClaim {DEFAULT_CLAIM}")
        claim = DEFAULT_CLAIM
    return {
        "persistentVolumeClaim": {"claimName": claim, **({"readOnly": True} if read_only else {})}
    }
