"""What must be true before `up`: each check says ok, warn or fail with a clear message.

For a node of a multi-node profile (`node_checks`) the check names carry the node, e.g. `spark-2/ports`;
a node whose engine is on this machine (unix socket) is checked directly, a remote one through a throw-away
container on that host's network and IPC namespace (engine.host_probe): its ports and /dev/shm free space.
"""

from __future__ import annotations

import socket
from dataclasses import asdict, dataclass

from composegen.errors import ComposegenError
from composegen.profiles import rules
from composegen.profiles.resolved import Resolved
from composegen.stack import engine

LEFTOVER_WARN_BYTES = 256 * 2**20


@dataclass
class Check:
    name: str
    status: str  # ok | warn | fail
    message: str

    def to_json(self) -> dict:
        return asdict(self)


def port_free(bind: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((bind, port))
            return True
        except OSError:
            return False


def attempt(name: str, fn) -> Check:
    try:
        result = fn()
    except ComposegenError as exc:
        return Check(name, "fail", exc.message + (f" (hint: {exc.hint})" if exc.hint else ""))
    return result if isinstance(result, Check) else Check(name, "ok", str(result))


def engine_checks() -> list[Check]:
    return [
        attempt("engine", lambda: f"Docker {engine.engine_info().get('ServerVersion', '?')} reachable"),
        attempt("compose", lambda: f"docker compose {engine.compose_version()}"),
    ]


def gpu_check(emulate: bool, target: engine.Target | None = None) -> Check:
    if emulate:
        return Check("gpus", "ok", "emulated: GPU reservations removed")
    runtimes = engine.engine_info(target).get("Runtimes", {})
    if "nvidia" in runtimes:
        return Check("gpus", "ok", "nvidia runtime registered with the engine")
    return Check(
        "gpus", "fail", "the engine has no nvidia runtime; install nvidia-container-toolkit (or use --emulate)"
    )


def port_check(r: Resolved) -> Check:
    p = r.profile.service.port
    if port_free(p.bind, p.host):
        return Check("port", "ok", f"{p.bind}:{p.host} is free")
    return Check("port", "fail", f"host port {p.bind}:{p.host} is already in use")


def image_check(image: str, emulate: bool, target: engine.Target | None = None) -> Check:
    if engine.image_present(image, target):
        return Check("image", "ok", f"{image} present")
    if emulate:
        return Check("image", "fail", f"emulator image {image} is missing")
    engine.pull(image, target)  # raises a clear EngineError when no registry answers
    return Check("image", "ok", f"{image} pulled")


def ulimit_check(requested: dict, ceiling: dict[str, int], emulate: bool) -> Check:
    too_high = []
    for name, value in requested.items():
        hard = value if isinstance(value, int) else value["hard"]
        cap = ceiling.get(name)
        if cap not in (None, -1) and (hard == -1 or hard > cap):
            too_high.append(f"{name} {hard} > {cap}")
    if not too_high:
        return Check("ulimits", "ok", "requested ulimits are grantable")
    status = "warn" if emulate else "fail"
    what = (
        "clamped for the emulator" if emulate else "raise the engine's limits (e.g. LimitMEMLOCK=infinity for dockerd)"
    )
    return Check("ulimits", status, f"the engine cannot grant {', '.join(too_high)}: {what}")


def shm_check(r: Resolved, shm_path: str = "/dev/shm") -> list[Check]:
    from composegen.shm import scan as shm

    need = rules.shm_need_bytes(r)
    try:
        report = shm.scan(shm_path, container_labels=lambda cid: None)
    except ComposegenError as exc:
        return [Check("shm", "warn", f"could not scan {shm_path}: {exc.message}")]
    out = []
    free = report["filesystem"]["free_bytes"]
    where = "the host's /dev/shm (ipc: host)" if r.profile.service.ipc == "host" else shm_path
    if r.profile.service.ipc == "host" and free < need:
        out.append(
            Check(
                "shm",
                "fail",
                f"{where} has {free / 2**30:.1f} GiB free; this profile needs {need / 2**30:.1f} GiB (KV offload + headroom)",
            )
        )
    else:
        out.append(Check("shm", "ok", f"{where}: {free / 2**30:.1f} GiB free, needs {need / 2**30:.1f} GiB"))
    for warning in shm.check_budget(report, need, LEFTOVER_WARN_BYTES):
        out.append(Check("shm-leftovers", "warn", warning + " — `composegen shm --reclaim` or `up --reclaim-shm`"))
    return out


def _named(check: Check, node: str) -> Check:
    return Check(f"{node}/{check.name}", check.status, check.message)


def node_checks(r: Resolved, node, target: engine.Target, image: str, emulate: bool) -> tuple[list[Check], dict | None]:
    """GPU runtime, host ports (the head's API and master port), /dev/shm and ulimits of one node whose
    engine answered and holds `image`. Returns the checks and the engine's rlimit ceiling (None without ulimits)."""
    svc, nodes = r.profile.service, r.profile.nodes
    checks = [_named(attempt("gpus", lambda: gpu_check(emulate, target)), node.name)]
    wildcard = "::" if ":" in nodes.master_addr else "0.0.0.0"  # torch's store listens on every interface
    ports = [(svc.port.bind, svc.port.host, "API"), (wildcard, nodes.master_port, "master")] if node.rank == 0 else []
    if target.is_local:
        free = {(h, p): port_free(h, p) for h, p, _ in ports}
        checks += [_named(c, node.name) for c in shm_check(r)]
    else:
        try:
            probe = engine.host_probe(image, target, [(h, p) for h, p, _ in ports])
        except ComposegenError as exc:
            return checks + [Check(f"{node.name}/host", "fail", exc.message)], None
        free = {(item["host"], item["port"]): item["free"] for item in probe["ports"]}
        checks += _remote_shm_checks(r, node.name, probe["shm"])
    for host, port, what in ports:
        ok = free[(host, port)]
        checks.append(
            Check(
                f"{node.name}/port",
                "ok" if ok else "fail",
                f"{what} port {host}:{port} is {'free' if ok else 'already in use'} on {target.label}",
            )
        )
    ceiling = None
    ulimits = svc.ulimits_plain()
    if ulimits:
        try:
            ceiling = engine.engine_rlimits(image, target)
            checks.append(_named(ulimit_check(ulimits, ceiling, emulate), node.name))
        except ComposegenError as exc:
            checks.append(Check(f"{node.name}/ulimits", "fail", exc.message))
    return checks, ceiling


def _remote_shm_checks(r: Resolved, node: str, report: dict) -> list[Check]:
    from composegen.shm import scan as shm

    need, free = rules.shm_need_bytes(r), report["free_bytes"]
    status = "fail" if r.profile.service.ipc == "host" and free < need else "ok"
    out = [Check(f"{node}/shm", status, f"/dev/shm: {free / 2**30:.1f} GiB free, needs {need / 2**30:.1f} GiB")]
    known = [e for e in report["entries"] if shm.match_pattern(e["name"])]
    size = sum(e["bytes"] for e in known)
    if known and size > LEFTOVER_WARN_BYTES:
        out.append(
            Check(
                f"{node}/shm-leftovers",
                "warn",
                f"{len(known)} files named like vLLM/NCCL/PyTorch leftovers use "
                f"{size / 2**20:.0f} MiB; holders are not checked on a remote host — run `composegen shm` there",
            )
        )
    return out


def reclaim_shm(path: str = "/dev/shm") -> Check:
    """`up --reclaim-shm`: remove leftovers first — but never past processes whose holdings could not
    be read (then a warning says how to reclaim by hand once they are checked)."""
    from composegen.errors import CheckFailed
    from composegen.shm import reclaim as shm_reclaim

    try:
        result = shm_reclaim.reclaim(path, yes=True)
    except CheckFailed as exc:
        return Check(
            "shm-reclaim",
            "warn",
            f"{exc.message}; nothing reclaimed — `composegen shm --reclaim --yes --ignore-unreadable` once those processes are checked",
        )
    return Check(
        "shm-reclaim", "ok", f"reclaimed {len(result['removed'])} leftover file(s), {result['bytes_freed']} bytes"
    )
