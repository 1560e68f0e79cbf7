"""Cross-field rules a single field cannot check. Each problem names the key it is reported at."""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass

from composegen.addresses import is_loopback
from composegen.profiles import mounts

# where a node's hf_cache goes
from composegen.profiles.mounts import HF_CACHE_TARGET as HF_CACHE_TARGET
from composegen.profiles.resolved import DEV_MODE_ENV, Resolved
from composegen.profiles.schema import SHM_MIN_BYTES, Node
from composegen.profiles.yamlio import INT_LIMIT
from composegen.project import compose_project
from composegen.units import GIB, parse_bytes

SHM_HEADROOM_GIB = 2.0  # vLLM's message queues and NCCL need room beside the offload buffer


@dataclass(frozen=True)
class Problem:
    path: tuple[str | int, ...]
    message: str


def size_bytes(text: str) -> int:
    """Compose byte values: '32gb', '16g', '512m' (binary units, as Docker reads them)."""
    size = parse_bytes(text)
    if size is None:
        raise ValueError(f"not a size: {text!r}")
    return size


def offload_gib(r: Resolved) -> float:
    return float(r.flag("kv-offloading-size") or 0.0)


def shm_need_bytes(r: Resolved) -> int:
    """What /dev/shm must hold for this profile: the KV offload buffer plus headroom."""
    return int((offload_gib(r) + SHM_HEADROOM_GIB) * GIB)


def check(r: Resolved) -> list[Problem]:
    tp, pp = r.flags.get("tensor-parallel-size", 1), r.flags.get("pipeline-parallel-size", 1)
    out = _flag_problems(r.flags)
    svc = r.profile.service
    if r.profile.nodes is None and tp * pp != svc.gpus.n:
        out.append(
            Problem(
                ("service", "gpus"),
                f"reserves {svc.gpus.n} GPU(s) but tensor-parallel-size × pipeline-parallel-size = "
                f"{tp} × {pp} = {tp * pp}",
            )
        )
    if r.profile.nodes is not None:
        out += _node_problems(r, tp * pp)
    dcp = r.flags.get("decode-context-parallel-size", 1)
    if dcp >= 1 and tp % dcp:
        out.append(
            Problem(
                ("vllm", "decode-context-parallel-size"),
                f"{dcp} does not divide tensor-parallel-size {tp}",
            )
        )
    out += _shm_problems(r)
    if r.marks is not None:  # first: a secret reference in a source is named as such
        out += [
            Problem(path, message)
            for path, message in mounts.secret_reference_problems(r.marks.data)
        ]
    out += [Problem(path, message) for path, message in mounts.mount_problems(r.profile)]
    out += _image_policy_problems(r)
    out += _standby_problems(r)
    if not r.profile.pinned and not r.profile.image_unpinned_reason:
        out.append(
            Problem(
                ("image",),
                f"{r.profile.image!r} is not pinned; use repo@sha256:<64 hex>, or state image_unpinned_reason",
            )
        )
    return out


def _flag_problems(f: dict) -> list[Problem]:
    out: list[Problem] = []
    util = f.get("gpu-memory-utilization")
    if util is not None and not 0 < util <= 1:
        out.append(Problem(("vllm", "gpu-memory-utilization"), f"must be in (0, 1], got {util}"))
    batched, seqs = f.get("max-num-batched-tokens"), f.get("max-num-seqs")
    if batched is not None and seqs is not None and batched < seqs:
        out.append(
            Problem(
                ("vllm", "max-num-batched-tokens"),
                f"{batched} is below max-num-seqs {seqs}; each step must fit one token per sequence",
            )
        )
    max_len = f.get("max-model-len")
    chunked = f.get("enable-chunked-prefill", True)  # on by default in vLLM's V1 engine
    if isinstance(max_len, int) and batched is not None and max_len > batched and chunked is False:
        out.append(
            Problem(
                ("vllm", "max-model-len"),
                f"{max_len} exceeds max-num-batched-tokens {batched} while enable-chunked-prefill is false; "
                "a prompt could never be scheduled",
            )
        )
    for name in POSITIVE_FLAGS:
        if isinstance(f.get(name), int) and f[name] < 1:
            out.append(Problem(("vllm", name), f"must be at least 1, got {f[name]}"))
    if isinstance(max_len, int) and max_len < 1 and max_len != -1:
        out.append(
            Problem(("vllm", "max-model-len"), f"must be positive (or -1/auto), got {max_len}")
        )
    return out


def _standby_problems(r: Resolved) -> list[Problem]:
    out = []
    if DEV_MODE_ENV in r.profile.service.environment:
        why = "set by composegen from `standby` (it opens vLLM's dev routes: /sleep, /collective_rpc, /reset_*)"
        out.append(Problem(("service", "environment", DEV_MODE_ENV), why))
    if r.profile.standby is not None and r.profile.nodes is not None:
        out.append(
            Problem(
                ("standby",), "not for multi-node stacks yet: sleep mode across nodes is unmeasured"
            )
        )
    return out


POSITIVE_FLAGS = (
    "max-num-batched-tokens",
    "max-num-seqs",
    "tensor-parallel-size",
    "pipeline-parallel-size",
    "decode-context-parallel-size",
)


def _shm_problems(r: Resolved) -> list[Problem]:
    svc = r.profile.service
    out: list[Problem] = []
    offload = offload_gib(r)
    if offload < 0:
        out.append(Problem(("vllm", "kv-offloading-size"), f"must not be negative, got {offload}"))
    if svc.ipc != "host" and svc.shm_size is None:
        if offload > 0:
            message = (
                f"kv-offloading-size {offload:g} GiB lives in /dev/shm; "
                f"set shm_size to at least {offload + SHM_HEADROOM_GIB:g}gb"
            )
            out.append(Problem(("service", "shm_size"), message))
        out.append(
            Problem(
                ("service", "ipc"),
                "private IPC gets Docker's 64 MB /dev/shm, far too small for vLLM; "
                "set shm_size (e.g. 16gb) or ipc: host",
            )
        )
    if svc.shm_size is None:
        return out
    try:
        shm = size_bytes(svc.shm_size)
    except ValueError as exc:
        return [*out, Problem(("service", "shm_size"), str(exc))]
    if shm > INT_LIMIT:
        message = f"{svc.shm_size} is more bytes than compose can hold"
    elif offload > 0 and svc.ipc != "host" and shm < shm_need_bytes(r):
        message = (
            f"{svc.shm_size} cannot hold kv-offloading-size {offload:g} GiB"
            f" plus {SHM_HEADROOM_GIB:g} GiB headroom"
        )
    elif svc.ipc != "host" and shm < SHM_MIN_BYTES:
        message = (
            f"{svc.shm_size} is below {SHM_MIN_BYTES >> 30} GiB; a private /dev/shm that small cannot hold "
            "vLLM's message queues (or use ipc: host)"
        )
    else:
        return out
    return [*out, Problem(("service", "shm_size"), message)]


def _node_problems(r: Resolved, world: int) -> list[Problem]:
    nodes, svc = r.profile.nodes, r.profile.service
    out: list[Problem] = []
    if nodes is None:
        return out
    ranks = sorted(m.rank for m in nodes.members)
    if ranks != list(range(len(nodes.members))):
        out.append(
            Problem(
                ("nodes", "members"),
                f"node ranks must be 0..{len(nodes.members) - 1}, each once; got {ranks}",
            )
        )
    names = [m.name for m in nodes.members]
    if len(set(names)) != len(names):
        out.append(Problem(("nodes", "members"), f"node names must be unique; got {names}"))
    per_node = {(m.gpus or svc.gpus).n for m in nodes.members}
    if len(per_node) != 1:
        out.append(
            Problem(
                ("nodes", "members"),
                f"every node must reserve the same number of GPUs; got {sorted(per_node)}",
            )
        )
    elif world != per_node.pop() * len(nodes.members):
        gpus = (nodes.members[0].gpus or svc.gpus).n
        out.append(
            Problem(
                ("vllm", "tensor-parallel-size"),
                f"tensor × pipeline parallel = {world}, but {len(nodes.members)} nodes × {gpus} GPU(s) = "
                f"{gpus * len(nodes.members)}",
            )
        )
    backend = r.flags.get("distributed-executor-backend")
    if backend not in (None, "mp"):
        # --nnodes/--node-rank drive vLLM's mp launcher; Ray forms its own cluster and ignores them.
        out.append(
            Problem(
                ("vllm", "distributed-executor-backend"),
                f"multi-node nodes: needs the mp backend (vLLM's --nnodes launch), got {backend!r}",
            )
        )
    if nodes.master_port == svc.port.host:
        # Every node runs on the host network: the head's API and its rendezvous share one port
        # space.
        out.append(
            Problem(
                ("nodes", "master_port"),
                f"{nodes.master_port} is also the API port (service.port.host); the head listens on both",
            )
        )
    return out


# compose resolves these on the machine that runs `docker compose`
CLIENT_SIDE_SOURCES = (".", "~", "$")


def _remote(node: Node) -> bool:
    return bool(node.context) or bool(
        node.docker_host and not node.docker_host.startswith(("unix://", "npipe://"))
    )


def node_warnings(r: Resolved) -> list[str]:
    """Pitfalls of driving a remote engine from here: paths compose resolves on this machine."""
    nodes, svc = r.profile.nodes, r.profile.service
    out: list[str] = []
    if nodes is None:
        return out
    for node in nodes.by_rank:
        if not _remote(node):
            continue
        for v in svc.volumes:
            replaced = node.hf_cache and v.target == HF_CACHE_TARGET
            if not v.named and not replaced and v.source.startswith(CLIENT_SIDE_SOURCES):
                out.append(
                    f"node {node.name}: volume source {v.source!r} is resolved on this machine, not on "
                    f"{node.docker_host or node.context}; use an absolute path (or nodes.members[].hf_cache)"
                )
    return out


def _image_policy_problems(r: Resolved) -> list[Problem]:
    """`image_policy: local-build` is an opt-in for one case only: a tag the host builds itself."""
    p = r.profile
    if p.image_policy != "local-build":
        return []
    first = p.image.split("/")[0]
    if p.pinned:
        why = "local-build is for an image without a digest; this one is pinned"
    elif not (p.image_unpinned_reason or "").strip():
        why = "local-build needs image_unpinned_reason: why the image is built locally"
    elif "/" in p.image and ("." in first or ":" in first or first == "localhost"):
        why = f"local-build, but {p.image!r} names a registry ({first}); pin its digest"
    else:
        return []
    return [Problem(("image_policy",), why)]


def notes(r: Resolved) -> list[str]:
    """Facts worth knowing that are not findings: `up` checks them, so `validate --strict` does not
    fail."""
    p, svc = r.profile, r.profile.service
    out = []
    if offload_gib(r) > 0 and svc.ipc == "host":
        out.append(
            f"kv-offloading-size {offload_gib(r):g} GiB lives in the host's /dev/shm (ipc: host makes shm_size inert); "
            f"`composegen up` checks the host has {shm_need_bytes(r) / GIB:g} GiB free there"
        )
    if p.image_policy == "local-build":
        out.append(
            f"image {p.image!r} is built locally (image_policy: local-build): {p.image_unpinned_reason}"
        )
    return out


def warnings(r: Resolved) -> list[str]:
    svc = r.profile.service
    out: list[str] = []
    if not r.profile.pinned and r.profile.image_policy != "local-build":
        out.append(
            f"image {r.profile.image!r} is not pinned by digest: {r.profile.image_unpinned_reason}"
        )
    # the starter's placeholder: no model has this commit
    if set(r.profile.model.revision or "") == {"0"}:
        out.append("model.revision is all zeros, a placeholder: put the 40-hex commit you tested")
    if not is_loopback(svc.port.bind):
        out.append(
            f"the API is published on {svc.port.bind}:{svc.port.host}, reachable beyond this host"
        )
    if r.profile.nodes is not None:
        out += node_warnings(r)
    return out + trust_warnings(r.flags)


def trust_warnings(flags: dict) -> list[str]:
    """Flags that hand the engine's trust to someone else: code from the model repository, every
    file of the container, any web origin with the user's credentials. Allowed, but `validate
    --strict` fails."""
    out = []
    if flags.get("trust-remote-code") is True:
        out.append(
            "vllm.trust-remote-code: runs Python code from the model repository inside the engine"
        )
    media = flags.get("allowed-local-media-path")
    if isinstance(media, str) and posixpath.normpath(media or ".") in (
        "/",
        "//",
        "/proc",
        "/etc",
        "/root",
        "/home",
    ):
        out.append(
            f"vllm.allowed-local-media-path: {media!r} lets any request read files of the container"
        )
    origins = flags.get("allowed-origins")
    if isinstance(origins, str):
        try:
            origins = json.loads(origins)
        except ValueError:
            origins = None
    if flags.get("allow-credentials") is True and isinstance(origins, list) and "*" in origins:
        out.append(
            'vllm.allowed-origins: ["*"] with allow-credentials: any web page can call the API as the user'
        )
    return out


def across_profiles(resolved: list[Resolved]) -> list[str]:
    """Warnings no single profile shows: two profiles that would fight over a container name or a
    host port (a child that only says `extends:` inherits both), so they cannot run side by side."""
    out: list[str] = []
    for what, key in (
        ("container_name", lambda r: r.profile.service.container_name),
        ("host port", lambda r: (r.profile.service.port.bind, r.profile.service.port.host)),
    ):
        seen: dict = {}
        for r in resolved:
            value = key(r)
            if value is not None and r.profile.nodes is None:
                seen.setdefault(value, []).append(r.name)
        for value, names in seen.items():
            if len(names) > 1:
                shown = value if isinstance(value, str) else f"{value[0]}:{value[1]}"
                out.append(
                    f"{', '.join(names)} share {what} {shown}: they cannot run at the same time"
                )
    projects: dict[str, list[str]] = {}
    for r in resolved:  # profile a-b node c and profile a node b-c would both be composegen-a-b-c
        nodes = r.profile.nodes.members if r.profile.nodes else [None]
        for node in nodes:
            label = r.name if node is None else f"{r.name}/{node.name}"
            projects.setdefault(
                compose_project(r.name, None if node is None else node.name, r.prefix), []
            ).append(label)
    for project, labels in sorted(projects.items()):
        if len(labels) > 1:
            out.append(
                f"{', '.join(labels)} share compose project {project}: `up` of one would replace the other"
            )
    return out
