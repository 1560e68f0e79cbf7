"""What a pod asks the scheduler for, and the Hugging Face cache claim the kustomization carries.

Requests, not limits: a memory limit would have the kernel kill a 30-minute load for a passing peak;
a request makes the scheduler pick a node that holds the pod's memory-backed /dev/shm (an emptyDir of
medium Memory is charged to the pod) and its CPU KV offload buffers."""

from __future__ import annotations

from composegen.profiles import caches, resolve
from composegen.units import parse_bytes

DEFAULT_CLAIM = "hf-cache"
# A claim composegen renders without a size in the profile: room for a DS4-Flash-class snapshot and
# the next one being tried; the profile's kubernetes.hf_cache.size says otherwise.
DEFAULT_CLAIM_SIZE = 1024 * 2**30
# the compile caches' claim: a DS4-Flash-class start's kernels and graphs with room to spare
CACHE_CLAIM_SIZE = 64 * 2**30
ENGINE_MEMORY = 8 * 2**30  # vLLM's API server and workers themselves, before any buffer
# vLLM flags whose value is GiB of host memory the engine fills (CPU KV offload, weight offload)
HOST_GIB_FLAGS = ("kv-offloading-size", "cpu-offload-gb")


def quantity(size: int) -> str:
    """Bytes as a Kubernetes quantity, exact: 32Gi, 512Mi, or the plain number."""
    for suffix, unit in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if size and size % unit == 0:
            return f"{size // unit}{suffix}"
    return str(size)


def requests(r: resolve.Resolved, gpus: int) -> dict[str, str]:
    """resources.requests of a vLLM container with GPUS GPUs: the profile's, else the estimate."""
    given = r.profile.kubernetes.requests
    cpu = given.cpu or str(gpus + 1)  # a worker process per GPU, one API server
    if given.memory is not None:
        memory = parse_bytes(given.memory) or 0
    else:
        shm = parse_bytes(r.profile.service.shm_size or "0") or 0
        offload = sum(int(float(r.profile.vllm.get(flag) or 0) * 2**30) for flag in HOST_GIB_FLAGS)
        memory = shm + offload + ENGINE_MEMORY
    return {"cpu": cpu, "memory": quantity(memory)}


def claim(r: resolve.Resolved, mounted: str | None, multi_node: bool) -> dict | None:
    """The PersistentVolumeClaim the pods mount as the cache (MOUNTED: its name, or None for a
    hostPath) when composegen owns it: the default claim, or a profile's claim with a size. A claim
    the profile names without a size exists already: None."""
    chosen = r.profile.kubernetes.hf_cache
    if mounted is None or (chosen is not None and chosen.size is None):
        return None
    size = parse_bytes(chosen.size) if chosen is not None and chosen.size else None
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": mounted, "labels": {"app.kubernetes.io/managed-by": "composegen"}},
        "spec": {
            # every node of a multi-node stack mounts it at once
            "accessModes": ["ReadWriteMany" if multi_node else "ReadWriteOnce"],
            "resources": {"requests": {"storage": quantity(size or DEFAULT_CLAIM_SIZE)}},
        },
    }


def cache_claim(r: resolve.Resolved, multi_node: bool) -> dict | None:
    """The compile caches' PersistentVolumeClaim, named and labelled by their key (docs/caches.md);
    None when the profile keeps no volume of them."""
    name = caches.volume(r)
    if name is None:
        return None
    labels = {"app.kubernetes.io/managed-by": "composegen", caches.KEY_LABEL: caches.key(r)}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "accessModes": ["ReadWriteMany" if multi_node else "ReadWriteOnce"],
            "resources": {"requests": {"storage": quantity(CACHE_CLAIM_SIZE)}},
        },
    }
