"""The Kubernetes objects of a resolved profile, built from the same facts as its compose file.

One node: a Deployment (one replica, Recreate: the GPUs are never held twice). `nodes:`: a
LeaderWorkerSet (leaderworkerset.x-k8s.io/v1) whose group size is the node count; the leader runs
rank 0's argv, the workers the headless argv, with `--nnodes`, `--node-rank` and `--master-addr`
read from the variables LWS injects (LWS_GROUP_SIZE, LWS_WORKER_INDEX, LWS_LEADER_ADDRESS) through
Kubernetes' own `$(VAR)` expansion. Every other word of argv is the compose node's, `$`-escaped. A
Service publishes the API (the leader).

What Kubernetes cannot say is never dropped silently: `Notes.unmapped` (not rendered),
`Notes.adapted` (rendered another way) and `Notes.security` (hostIPC, hostNetwork, capabilities,
hostPath — emitted only because the compose stack has the same) go into the header comment and
`render --json`."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Any

from composegen.k8s import resources, weights_init
from composegen.k8s.expansion import escape, reference
from composegen.k8s.notes import Notes, stack_notes, workers_share_a_template
from composegen.k8s.resources import quantity as quantity  # diff/targets.py reads it here
from composegen.k8s.volumes import HF_VOLUME, SHM_VOLUME, pod_volumes
from composegen.profiles import caches, resolve
from composegen.profiles.schema import SECRET_RE, Node
from composegen.profiles.service import REF_RE
from composegen.render import LABEL_PREFIX, hf_home, members
from composegen.units import parse_duration

LWS_API = "leaderworkerset.x-k8s.io/v1"
# vLLM flag → the LWS variable that carries its value in every pod of a group.
LWS_FLAGS = {
    "nnodes": "LWS_GROUP_SIZE",
    "node-rank": "LWS_WORKER_INDEX",
    "master-addr": "LWS_LEADER_ADDRESS",
}
# device-plugin resource per compose driver
GPU_RESOURCES = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu"}
STARTUP_PERIOD_S = 10
INSTANCE, COMPONENT = "app.kubernetes.io/instance", "app.kubernetes.io/component"


@dataclass
class Manifests:
    profile: str
    name: str
    kind: str  # Deployment or LeaderWorkerSet
    workload: dict
    service: dict
    notes: Notes
    claim: dict | None = None  # the cache's PersistentVolumeClaim, when composegen renders it
    cache_claim: dict | None = None  # the compile caches' claim (docs/caches.md)

    @property
    def workload_file(self) -> str:
        return f"{self.kind.lower()}.yaml"


def k8s_name(profile: str) -> str:
    """The objects' name: a DNS label with room for the suffixes LWS and ReplicaSets add."""
    base = f"composegen-{profile}".replace("_", "-")
    if len(base) <= 40:
        return base
    return f"{base[:31].rstrip('-')}-{hashlib.sha256(profile.encode()).hexdigest()[:8]}"


def build(r: resolve.Resolved) -> Manifests:
    notes = Notes()
    name = k8s_name(r.name)
    nodes = members(r)
    top = {f"{LABEL_PREFIX}profile": r.name, f"{LABEL_PREFIX}hash": r.hash}
    meta: dict[str, Any] = {
        "name": name,
        "labels": {INSTANCE: name, "app.kubernetes.io/managed-by": "composegen"},
        "annotations": top,
    }
    workload: dict[str, Any]
    if not nodes:
        pod = _pod(r, None, name, "server", notes)
        workload = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": meta,
            "spec": {
                "replicas": 1,
                "strategy": {"type": "Recreate"},
                "selector": {"matchLabels": {INSTANCE: name, COMPONENT: "server"}},
                "template": pod,
            },
        }
        component = "server"
    else:
        workers_share_a_template(nodes, notes)
        workload = {
            "apiVersion": LWS_API,
            "kind": "LeaderWorkerSet",
            "metadata": meta,
            "spec": {
                "replicas": 1,
                # vLLM's head waits for its workers: they must start before the leader is ready
                "startupPolicy": "LeaderCreated",
                "leaderWorkerTemplate": {
                    "size": len(nodes),
                    # composegen starts and stops the ranks together: a lone restarted rank can't rejoin
                    "restartPolicy": "RecreateGroupOnPodRestart",
                    "leaderTemplate": _pod(r, nodes[0], name, "leader", notes),
                    "workerTemplate": _pod(r, nodes[1], name, "worker", notes),
                },
            },
        }
        component = "leader"
    stack_notes(r, notes, f"{name}-api", STARTUP_PERIOD_S)
    svc = r.profile.service
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f"{name}-api", "labels": meta["labels"], "annotations": top},
        "spec": {
            "type": "ClusterIP",
            "selector": {INSTANCE: name, COMPONENT: component},
            "ports": [
                {"name": "http", "protocol": "TCP", "port": svc.port.host, "targetPort": "http"}
            ],
        },
    }
    mounted = _claim_mounted(workload)
    claim = resources.claim(r, mounted, bool(nodes))
    cache_claim = resources.cache_claim(r, bool(nodes))
    return Manifests(r.name, name, workload["kind"], workload, service, notes, claim, cache_claim)


def _claim_mounted(workload: dict) -> str | None:
    """The claim the pods mount as the Hugging Face cache (None: not a claim)."""
    spec = workload["spec"]
    pod = spec.get("template") or spec["leaderWorkerTemplate"]["leaderTemplate"]
    for volume in pod["spec"]["volumes"]:
        if volume["name"] == HF_VOLUME and "persistentVolumeClaim" in volume:
            return str(volume["persistentVolumeClaim"]["claimName"])
    return None


def lws_argv(r: resolve.Resolved, node: Node) -> list[str]:
    """A node's compose argv, escaped for Kubernetes, with the LWS-supplied values as `$(VAR)`."""
    words = [escape(w) for w in r.argv(node)]
    nodes = r.profile.nodes
    assert nodes is not None
    values = {
        "nnodes": len(nodes.members),
        "node-rank": node.rank,
        "master-addr": nodes.master_addr,
    }
    for flag, var in LWS_FLAGS.items():
        compose = [escape(w) for w in r.catalog.argv(flag, values[flag])]
        at = next(i for i in range(len(words)) if words[i : i + len(compose)] == compose)
        head, _, _ = compose[-1].rpartition("=")
        words[at + len(compose) - 1] = (
            f"{head}={reference(var)}" if len(compose) == 1 else reference(var)
        )
    return words


def _pod(r: resolve.Resolved, node: Node | None, name: str, component: str, notes: Notes) -> dict:
    p, svc = r.profile, r.profile.service
    host_network = node is not None  # composegen's multi-node compose files run on the host network
    labels = {INSTANCE: name, COMPONENT: component}
    annotations = {
        f"{LABEL_PREFIX}profile": r.name,
        f"{LABEL_PREFIX}hash": r.hash,
        f"{LABEL_PREFIX}served-name": p.model.served_name,
        f"{LABEL_PREFIX}vllm-version": p.vllm_version,
    }
    if node is not None:
        annotations |= {
            f"{LABEL_PREFIX}node": node.name,
            f"{LABEL_PREFIX}node-rank": str(node.rank),
        }
    volumes, mounts, hf_path = pod_volumes(r, node, notes)
    main = _container(r, node, mounts, notes)
    spec: dict[str, Any] = {}
    # a multi-node pod shares the node, as its compose node does
    if svc.ipc == "host" and host_network:
        spec["hostIPC"] = True
        notes.add("security", "ipc", "host", "hostIPC: true")
    # compose shares the host's /dev/shm for reclaim; a pod has its own, in memory
    elif svc.ipc == "host":
        adapted = f"no hostIPC: the pod's /dev/shm is the memory emptyDir {SHM_VOLUME}"
        notes.add("adapted", "ipc", "host", adapted)
    if host_network:
        spec["hostNetwork"] = True
        spec["dnsPolicy"] = "ClusterFirstWithHostNet"  # LWS_LEADER_ADDRESS is a cluster DNS name
        host_net = "hostNetwork: true (dnsPolicy ClusterFirstWithHostNet)"
        notes.add("security", "network_mode", "host", host_net)
    spec["terminationGracePeriodSeconds"] = math.ceil(parse_duration(svc.stop_grace_period) or 0)
    if hf_path is not None:
        spec["initContainers"] = [_weights_container(r, hf_path, mounts)]
    spec["containers"] = [main]
    spec["volumes"] = volumes
    return {"metadata": {"labels": labels, "annotations": annotations}, "spec": spec}


def _container(r: resolve.Resolved, node: Node | None, mounts: list[dict], notes: Notes) -> dict:
    p, svc = r.profile, r.profile.service
    headless = node is not None and node.rank != 0
    # on the host network vLLM binds the host port
    port = svc.port.container if node is None else svc.port.host
    c: dict[str, Any] = {
        "name": "vllm",
        "image": p.image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["vllm", "serve"],
        "args": [escape(w) for w in r.argv()] if node is None else lws_argv(r, node),
    }
    env = _env(r, node, notes)
    if env:
        c["env"] = env
    if not headless:
        c["ports"] = [{"name": "http", "containerPort": port, "protocol": "TCP"}]
    gpus = (node.gpus if node is not None and node.gpus else None) or svc.gpus
    resource = GPU_RESOURCES.get(gpus.driver)
    if resource is None:
        unmapped = "no known device-plugin resource: no GPU limit rendered"
        notes.add("unmapped", "gpus.driver", gpus.driver, unmapped)
    else:
        c["resources"] = {"limits": {resource: gpus.n}}
    c["resources"] = {**c.get("resources", {}), "requests": resources.requests(r, gpus.n)}
    if gpus.device_ids is not None:
        picks = f"{resource}: {gpus.n} (the device plugin picks)"
        notes.add("adapted", "gpus.device_ids", gpus.device_ids, picks)
    c["volumeMounts"] = mounts
    if node is not None and r.profile.nodes is not None and r.profile.nodes.rdma:
        c["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]}}
        added = "securityContext.capabilities.add: [IPC_LOCK]"
        notes.add("security", "cap_add", ["IPC_LOCK"], added)
    if not headless:
        c |= _probes(r, node)
    return c


def _probes(r: resolve.Resolved, node: Node | None) -> dict:
    svc = r.profile.service
    get: dict[str, Any] = {"path": "/health", "port": "http"}
    if node is not None and svc.port.bind not in ("0.0.0.0", "::", ""):
        # hostNetwork, API bound to one address: the kubelet asks it there
        get["host"] = svc.port.bind
    # period × failureThreshold covers the whole load, as compose's start_period does.
    return {
        "startupProbe": {
            "httpGet": get,
            "periodSeconds": STARTUP_PERIOD_S,
            "timeoutSeconds": 5,
            "failureThreshold": math.ceil(svc.startup_timeout / STARTUP_PERIOD_S),
        },
        "readinessProbe": {
            "httpGet": get,
            "periodSeconds": 30,
            "timeoutSeconds": 10,
            "failureThreshold": 3,
        },
    }


def _env(r: resolve.Resolved, node: Node | None, notes: Notes) -> list[dict]:
    env = {**r.profile.service.environment, **(node.environment if node is not None else {})}
    merged = caches.environment(r, {k: str(v) for k, v in env.items()}, hf_home(r, node))
    out: list[dict[str, Any]] = []
    for key, value in sorted(merged.items()):
        text = str(value)
        if not REF_RE.fullmatch(text):
            out.append({"name": key, "value": escape(text)})
            continue
        var = text[2:].split("}")[0].split(":")[0].split("-")[0].split("?")[0]
        if SECRET_RE.search(key) or SECRET_RE.search(var):
            # compose passes an unset `${VAR}` as empty; only `${VAR:?why}` / `${VAR?why}` insists
            # on it
            optional = "?" not in text
            ref = {"name": r.profile.kubernetes.secret, "key": var, "optional": optional}
            out.append({"name": key, "valueFrom": {"secretKeyRef": ref}})
        else:
            unmapped = "the host's environment has no Kubernetes equivalent"
            notes.add("unmapped", f"environment.{key}", text, unmapped)
    return out


def _weights_container(r: resolve.Resolved, snapshot: str, mounts: list[dict]) -> dict:
    return {
        "name": "weights-check",
        "image": r.profile.image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["python3", "-c", escape(weights_init.script()), escape(snapshot)],
        "volumeMounts": [{**m, "readOnly": True} for m in mounts if m["name"] == HF_VOLUME],
    }
