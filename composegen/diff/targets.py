"""`composegen diff NAME --targets compose,k8s`: is the Kubernetes rendering the same stack as the
compose one? docs/kubernetes.md says what each side is reduced to, per node (what the engine sees:
argv, image, environment, GPU count, /dev/shm size; any difference exits 1) and what is the target's
own (`target_only`: --master-addr, ports vs the Service, probes, ... listed, never failing).

Inputs: a profile name (both targets rendered in memory), or files: a compose file (or out/NAME for
a multi-node profile's node files) and an out/NAME/k8s/ directory."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from composegen import render
from composegen.diff.composeyaml import load_yaml, parse_compose_text, read_file
from composegen.diff.reports import Fact, TargetOnly, TargetsDiffReport
from composegen.errors import BadInput
from composegen.k8s import expansion, output
from composegen.k8s.manifests import quantity
from composegen.profiles import resolve
from composegen.profiles.service import REF_RE
from composegen.project import Project
from composegen.units import parse_bytes

FACTS = ("argv", "image", "environment", "gpus", "shm")


# ------------------------------------------------------------------ compose side


def compose_nodes(texts: dict[str, str]) -> dict[int | None, tuple[str, dict]]:
    """rank (None: one node) → (node name, the vllm service) of compose texts keyed by label."""
    found: dict[int | None, tuple[str, dict]] = {}
    for label, text in texts.items():
        service = (parse_compose_text(text, label).get("services") or {}).get("vllm")
        if not isinstance(service, dict):
            raise BadInput(f"{label}:1: services.vllm: no vLLM service to compare")
        labels = service.get("labels") or {}
        rank = labels.get("io.composegen.node-rank")
        key = int(rank) if isinstance(rank, str) and rank.isdigit() else None
        found[key] = (str(labels.get("io.composegen.node", "-")), service)
    return found


def _compose_facts(service: dict) -> dict[str, Any]:
    argv = [*(service.get("entrypoint") or []), *(service.get("command") or [])]
    env = {str(k): _compose_env(str(v)) for k, v in (service.get("environment") or {}).items()}
    devices = ((service.get("deploy") or {}).get("resources") or {}).get("reservations", {}).get(
        "devices"
    ) or []
    devices = devices or service.get("gpus") or []
    gpus = sum(
        d.get("count") or len(d.get("device_ids") or []) for d in devices if isinstance(d, dict)
    )
    shm = parse_bytes(str(service["shm_size"])) if service.get("shm_size") else None
    return {
        "argv": [str(w).replace("$$", "$") for w in argv],
        "image": service.get("image"),
        "environment": env,
        "gpus": gpus,
        "shm": quantity(shm) if shm else None,
    }


def _compose_env(value: str) -> str:
    # from the host's environment at `up`: the variable's name is what counts
    if REF_RE.fullmatch(value):
        return "from " + re.split(r"[:?}-]", value[2:], maxsplit=1)[0]
    return value.replace("$$", "$")


# ------------------------------------------------------------------ k8s side


def k8s_documents(directory: Path) -> list[dict]:
    kustomization = directory / "kustomization.yaml"
    if not kustomization.is_file():
        raise BadInput(f"{directory}: diff input: no kustomization.yaml (give out/NAME/k8s/)")
    docs = [load_yaml(read_file(kustomization, str(kustomization)), str(kustomization))]
    resources = docs[0].get("resources") if isinstance(docs[0], dict) else None
    if not isinstance(resources, list):
        raise BadInput(f"{kustomization}: resources: expected a list of this directory's files")
    for name in resources:
        if not isinstance(name, str) or "/" in name or name.startswith("."):
            raise BadInput(f"{kustomization}: resources: {name!r} is not a file of this directory")
        docs.append(
            load_yaml(read_file(directory / name, f"{directory}/{name}"), f"{directory}/{name}")
        )
    return [d for d in docs if isinstance(d, dict)]


def k8s_nodes(docs: list[dict]) -> dict[int | None, tuple[str, dict, dict]]:
    """rank → (node name, pod spec, the container's environment as the kubelet sets it)."""
    workload = next((d for d in docs if d.get("kind") in ("Deployment", "LeaderWorkerSet")), None)
    if workload is None:
        raise BadInput("k8s: no Deployment or LeaderWorkerSet among the kustomization's resources")
    if workload["kind"] == "Deployment":
        return {None: ("-", workload["spec"]["template"], {})}
    name, lwt = workload["metadata"]["name"], workload["spec"]["leaderWorkerTemplate"]
    size = int(lwt["size"])
    out: dict[int | None, tuple[str, dict, dict]] = {}
    for rank in range(size):
        template = lwt["leaderTemplate"] if rank == 0 else lwt["workerTemplate"]
        # As LWS v0.10.0 sets them (pkg/utils/pod/pod_utils.go, AddLWSVariables); the subdomain is
        # the LWS name.
        leader = f"{name}-0.{name}.<namespace>"
        lws = {
            "LWS_GROUP_SIZE": str(size),
            "LWS_WORKER_INDEX": str(rank),
            "LWS_LEADER_ADDRESS": leader,
        }
        node = (template.get("metadata", {}).get("annotations") or {}).get(
            "io.composegen.node", "-"
        )
        out[rank] = (node if rank <= 1 else f"rank {rank}", template, lws)
    return out


def _k8s_facts(template: dict, lws: dict[str, str]) -> dict[str, Any]:
    spec = template["spec"]
    c = next(c for c in spec["containers"] if c["name"] == "vllm")
    env: dict[str, str] = {}
    literal: dict[str, str] = dict(lws)
    for item in c.get("env") or []:
        if "value" in item:
            literal[item["name"]] = env[item["name"]] = expansion.expand(item["value"], literal)
        else:
            env[item["name"]] = "from " + item["valueFrom"]["secretKeyRef"]["key"]
    shm_mount = next(
        (m["name"] for m in c.get("volumeMounts") or [] if m["mountPath"] == "/dev/shm"), None
    )
    shm_volume: dict = next((v for v in spec.get("volumes") or [] if v["name"] == shm_mount), {})
    limits = (c.get("resources") or {}).get("limits") or {}
    return {
        "argv": [expansion.expand(w, literal) for w in [*c.get("command", []), *c.get("args", [])]],
        "image": c.get("image"),
        "environment": env,
        "gpus": sum(int(v) for k, v in limits.items() if k.endswith("/gpu")),
        "shm": (shm_volume.get("emptyDir") or {}).get("sizeLimit"),
    }


# ------------------------------------------------------------------ compare


_SHAPE_ERRORS = (KeyError, TypeError, AttributeError, ValueError, StopIteration, IndexError)


def compare(
    compose_texts: dict[str, str], k8s_docs: list[dict], labels: tuple[str, str]
) -> TargetsDiffReport:
    """Per node: the engine's facts from both sides (a wrong-shaped hand-edited side: bad input)."""
    try:
        return _compare(compose_texts, k8s_docs, labels)
    except _SHAPE_ERRORS as exc:
        raise BadInput(
            f"{labels[1]}: not a workload composegen can compare ({type(exc).__name__}: {exc})"
        ) from None


def _compare(
    compose_texts: dict[str, str], k8s_docs: list[dict], labels: tuple[str, str]
) -> TargetsDiffReport:
    composed, kube = compose_nodes(compose_texts), k8s_nodes(k8s_docs)
    facts: list[Fact] = []
    only: list[TargetOnly] = []
    for rank in sorted(kube, key=lambda k: -1 if k is None else k):
        _, template, lws = kube[rank]
        if rank not in composed:
            # ranks past the second share its template
            if rank is not None and rank > 1 and 1 in composed:
                continue
            raise BadInput(
                f"{labels[0]}: no compose node of rank {rank} to compare with {labels[1]}"
            )
        name, service = composed[rank]
        label = f"{name} (rank {rank})" if rank is not None else "-"
        a, b = _compose_facts(service), _k8s_facts(template, lws)
        master = _split_master(a["argv"]), _split_master(b["argv"])
        a["argv"], b["argv"] = master[0][0], master[1][0]
        if master[0][1] != master[1][1]:
            only.append(
                TargetOnly(
                    node=label,
                    setting="command.--master-addr",
                    compose=master[0][1],
                    k8s=master[1][1],
                )
            )
        facts += [
            Fact(node=label, fact=f, equal=a[f] == b[f], compose=a[f], k8s=b[f]) for f in FACTS
        ]
        only += _target_only(label, service, template, k8s_docs)
    missing = sorted(str(r) for r in composed if r not in kube)
    if missing:
        raise BadInput(f"{labels[1]}: no pod for compose rank(s) {', '.join(missing)}")
    return TargetsDiffReport(
        compose=labels[0],
        k8s=labels[1],
        equal=all(f.equal for f in facts),
        facts=facts,
        target_only=only,
    )


def _split_master(argv: list[str]) -> tuple[list[str], str | None]:
    """argv with --master-addr's value masked (fabric vs the leader pod), and that value."""
    flag = "--master-addr="
    value = next((w[len(flag) :] for w in argv if w.startswith(flag)), None)
    return [f"{flag}…" if w.startswith(flag) else w for w in argv], value


def _spec(t: dict) -> dict:
    return t["spec"]


# compose key → its Kubernetes counterpart in (pod template, vllm container, Service); None: no
# equivalent.
_TARGET_KEYS = {
    "container_name": lambda t, c, svc: None,
    "init": lambda t, c, svc: None,
    "ulimits": lambda t, c, svc: None,
    "devices": lambda t, c, svc: None,
    "ipc": lambda t, c, svc: {"hostIPC": _spec(t).get("hostIPC", False)},
    "network_mode": lambda t, c, svc: {"hostNetwork": _spec(t).get("hostNetwork", False)},
    "cap_add": lambda t, c, svc: (c.get("securityContext") or {}).get("capabilities"),
    "ports": lambda t, c, svc: svc
    and [f"{p['port']}->{p['targetPort']}" for p in svc["spec"]["ports"]],
    "restart": lambda t, c, svc: _spec(t).get("restartPolicy", "Always"),
    "stop_grace_period": lambda t, c, svc: _spec(t).get("terminationGracePeriodSeconds"),
    "healthcheck": lambda t, c, svc: {k: c[k] for k in ("startupProbe", "readinessProbe") if k in c}
    or None,
    "volumes": lambda t, c, svc: {m["mountPath"]: m["name"] for m in c.get("volumeMounts") or []},
    "labels": lambda t, c, svc: (t.get("metadata") or {}).get("annotations"),
}


def _target_only(node: str, service: dict, template: dict, docs: list[dict]) -> list[TargetOnly]:
    c = next(c for c in template["spec"]["containers"] if c["name"] == "vllm")
    svc = next((d for d in docs if d.get("kind") == "Service"), None)
    return [
        TargetOnly(node=node, setting=key, compose=service[key], k8s=counterpart(template, c, svc))
        for key, counterpart in _TARGET_KEYS.items()
        if key in service
    ]


def format_text(report: TargetsDiffReport) -> str:
    lines = [f"--- compose: {report.compose}", f"+++ k8s:     {report.k8s}"]
    for f in report.facts:
        counted = {"argv": "words", "environment": "variables"}
        shown = f"{len(f.compose)} {counted[f.fact]}" if f.fact in counted else f.compose
        lines.append(
            f"  {'equal ' if f.equal else 'DIFFER'}  {f.node}  {f.fact}: "
            + (f"{shown}" if f.equal else f"compose {f.compose!r}  k8s {f.k8s!r}")
        )
    lines.append("target-only (the target's own form; not a difference of the stack):")
    lines += [
        f"  {t.node}  {t.setting}: compose {_short(t.compose)}  k8s {_short(t.k8s)}"
        for t in report.target_only
    ]
    verdict = "functionally equal" if report.equal else "NOT functionally equal"
    lines.append(f"{verdict}: argv, image, environment, GPU count and shm size of every node")
    return "\n".join(lines)


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 100 else text[:97] + "..."


def load(root: Path, a: str, b: str | None) -> TargetsDiffReport:
    """`diff NAME --targets compose,k8s` (b None), or `diff COMPOSE_FILE_OR_OUT_DIR K8S_DIR`."""
    if b is None:
        r = resolve.load(Project(Path(root)), a)
        texts = {f"profile:{key}": text for key, text in render.render_stack(r).items()}
        files, _ = output.render_profile(r)
        docs = [
            load_yaml(text, key)
            for key, text in files.items()
            if not key.endswith("kustomization.yaml")
        ]
        return compare(texts, docs, (f"profile:{a} (compose)", f"profile:{a} (k8s)"))
    side_a, side_b = (_existing(spec, Path(root)) for spec in (a, b))
    if side_a.is_dir():  # out/NAME of a multi-node profile: its node files
        found = sorted(side_a.glob("*/compose.yaml")) or sorted(side_a.glob("compose.yaml"))
        if not found:
            raise BadInput(f"{a}: diff input: no compose.yaml in it or its node folders")
        texts = {str(f): read_file(f, str(f)) for f in found}
    else:
        texts = {a: read_file(side_a, a)}
    if not side_b.is_dir():
        raise BadInput(
            f"{b}: diff input: --targets compose,k8s needs the k8s side as a directory (out/NAME/k8s/)"
        )
    return compare(texts, k8s_documents(side_b), (a, b))


def _existing(spec: str, root: Path) -> Path:
    for candidate in (Path(spec), root / spec):
        if candidate.exists():
            return candidate
    raise BadInput(f"{spec}: diff input: no such file or directory")
