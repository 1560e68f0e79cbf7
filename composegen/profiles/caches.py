"""What a stack's start compiles, kept: the cache variables, the mount, and the key that makes a reuse
safe (docs/caches.md).

vLLM's torch.compile and AOT artifacts, Inductor's, Triton's, FlashInfer's and CUDA's JIT caches each go
to a default inside the container (gone at `down`) unless a variable points them elsewhere. The render
points every one at CACHE_TARGET, a named volume whose name is the key: the image (so vLLM, torch and
every kernel library's version), the model and the flags the compilers key on. Two stacks share a volume
only when all of that is equal, whatever their profile names; inside it vLLM, Inductor and Triton key
each artifact by their own hashes as well. `caches: off` renders none of it; `caches: PATH` mounts a
directory of the project instead of a volume."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Protocol

from composegen.profiles.reports import ShowCaches


class Resolved(Protocol):
    """What the key is made of (profiles.resolved.Resolved, without importing it: it shows these)."""

    profile: Any
    flags: dict[str, Any]


CACHE_TARGET = "/composegen-cache"
VOLUME_PREFIX = "composegen-cache-"
EMULATED = "-emulated"  # after the key: an emulated start's own volume (stack/emulate.py)
KEY_LABEL = "io.composegen.cache-key"  # on the Kubernetes claim
MOUNTED = "composegen-cache"  # the volume's name inside a compose file; its `name:` is the key's
KEY_PATH = f"volumes.{MOUNTED}.name"  # where `diff` shows a key change (functional)
# variable -> directory under CACHE_TARGET. The six a real vLLM 0.26.0 honoured when every cache was
# pointed at one directory (tests/data/real-0.26.0-h100-warmstart/README.md); XDG_CACHE_HOME catches
# the libraries that follow it (vLLM's own default root, FlashInfer's, others'), so HF_HOME is pinned
# to the Hugging Face mount, which would otherwise follow it too.
VARIABLES = {
    "VLLM_CACHE_ROOT": "vllm",
    "TORCHINDUCTOR_CACHE_DIR": "inductor",
    "TRITON_CACHE_DIR": "triton",
    "FLASHINFER_WORKSPACE_BASE": "flashinfer",
    "XDG_CACHE_HOME": "xdg",
    "CUDA_CACHE_PATH": "nv",
}
# The flags what is compiled depends on: the parallel layout, the compile and graph configuration, the
# dtypes, and max-num-batched-tokens (the end of vLLM's compile range: `compile_ranges_endpoints`) and
# max-num-seqs (the CUDA graph capture sizes).
_KEYED = (
    "tensor-parallel-size pipeline-parallel-size data-parallel-size decode-context-parallel-size "
    "enable-expert-parallel compilation-config enforce-eager dtype kv-cache-dtype quantization "
    "max-num-batched-tokens max-num-seqs speculative-config attention-backend moe-backend "
    "linear-backend"
)
KEYED_FLAGS = tuple(_KEYED.split())
# `caches:`: volume (the default), off, or a directory of the project
PATH_RE = re.compile(r"^(?!/)(?!.*(?:^|/)\.\.?(?:/|$))[A-Za-z0-9._][A-Za-z0-9._/-]*$")


def problem(value: str) -> str | None:
    """Why a `caches:` value is refused (None: accepted)."""
    if value in ("volume", "off") or PATH_RE.fullmatch(value.removeprefix("./")):
        return None
    return (
        f"{value!r}: `volume`, `off`, or a directory inside the project (a relative path without "
        "`..`, `~` or `$`): a profile never reaches outside its project"
    )


def key(r: Resolved) -> str:
    """16 hex of what makes a compiled artifact valid for this stack (never the profile's name)."""
    model = r.profile.model
    doc = {
        "image": r.profile.image,
        "model": [model.path or model.id, model.revision],
        "flags": {f: r.flags[f] for f in KEYED_FLAGS if f in r.flags},
    }
    blob = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def volume_name(key: str, emulated: bool = False) -> str:
    """The named volume of KEY's caches; an emulated start's is its own (a real one never loads it)."""
    return VOLUME_PREFIX + key + EMULATED * emulated


def volume(r: Resolved, emulated: bool = False) -> str | None:
    """The named volume of the stack's caches (None: off, or a project directory)."""
    return volume_name(key(r), emulated) if r.profile.caches == "volume" else None


def source(r: Resolved, depth: int) -> str | None:
    """The mount's source as the compose file `depth` folders below the project root says it."""
    if r.profile.caches == "off":
        return None
    if r.profile.caches == "volume":
        return MOUNTED
    return "../" * depth + r.profile.caches.removeprefix("./").rstrip("/")


def shown(r: Resolved, hf_home: str | None) -> ShowCaches:
    """`show`'s account of the caches: where they are kept and which variables point there."""
    kept = r.profile.caches
    variables = {k: v for k, v in environment(r, {}, hf_home).items() if k in VARIABLES}
    return ShowCaches(
        kept=kept,
        key=key(r) if kept != "off" else None,
        volume=volume(r),
        target=CACHE_TARGET if kept != "off" else None,
        variables=variables,
    )


def environment(r: Resolved, env: dict[str, str], hf_home: str | None) -> dict[str, str]:
    """`env` with the cache variables it does not set itself (none when off). XDG_CACHE_HOME only
    with HF_HOME pinned at the Hugging Face mount `hf_home` (None: no such mount, no XDG_CACHE_HOME:
    the weights must never move into the compile cache)."""
    if r.profile.caches == "off":
        return env
    ours = {name: f"{CACHE_TARGET}/{sub}" for name, sub in VARIABLES.items()}
    if hf_home is None:
        del ours["XDG_CACHE_HOME"]
    else:
        ours["HF_HOME"] = hf_home
    return {**ours, **env}
