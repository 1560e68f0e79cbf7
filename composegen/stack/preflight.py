"""What must be true before `up`: each check says ok, warn or fail with a clear message.

`node_checks` checks one node of a deployment; on a multi-node profile the check names carry the
node, e.g. `spark-2/port`. A node whose engine is on this machine is checked directly, a remote one
through a labelled throw-away container on that host's network and IPC namespace
(hostprobe.host_probe)."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import asdict, dataclass

from composegen.errors import BadInput, CheckFailed, ComposegenError
from composegen.profiles import rules
from composegen.profiles.resolved import Resolved
from composegen.shm import scan
from composegen.stack import engine, enginecache, hostprobe, portowner
from composegen.stack.emulate import Ulimits
from composegen.stack.placement import Deployment, NodeRef
from composegen.stack.targets import DEFAULT, Target
from composegen.units import GIB, format_gib

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


def loopback_conflict(port: int, field: str) -> str | None:
    """Why 127.0.0.1:PORT on the default engine's host cannot be bound (a listener in the host's
    network, like the edge's door, restarts forever on a taken port), None when it is free or the
    engine is not on this machine (nothing here can tell)."""
    if not DEFAULT.is_local or port_free("127.0.0.1", port):
        return None
    holder = portowner.holder(port, DEFAULT)
    return f"127.0.0.1:{port} is in use: {holder}; {field} sets another port"


def attempt(name: str, fn: Callable[[], object]) -> Check:
    try:
        result = fn()
    except ComposegenError as exc:
        return Check(name, "fail", exc.message + (f" (hint: {exc.hint})" if exc.hint else ""))
    return result if isinstance(result, Check) else Check(name, "ok", str(result))


def gpu_check(emulate: bool, target: Target | None = None) -> Check:
    if emulate:
        return Check("gpus", "ok", "emulated: GPU reservations removed")
    runtimes = engine.engine_info(target).get("Runtimes", {})
    if "nvidia" in runtimes:
        return Check("gpus", "ok", "nvidia runtime registered with the engine")
    why = "the engine has no nvidia runtime; install nvidia-container-toolkit (or use --emulate)"
    return Check("gpus", "fail", why)


def image_check(
    image: str,
    emulate: bool,
    target: Target | None = None,
    on_pull: engine.PullListener | None = None,
) -> Check:
    if engine.image_present(image, target):
        return Check("image", "ok", f"{image} present")
    if emulate:
        return Check("image", "fail", f"emulator image {image} is missing")
    engine.pull(image, target, on_pull)  # raises a clear EngineError when no registry answers
    return Check("image", "ok", f"{image} pulled")


def ulimit_check(requested: Ulimits, ceiling: dict[str, int], emulate: bool) -> Check:
    too_high = []
    for name, value in requested.items():
        hard = value if isinstance(value, int) else value["hard"]
        cap = ceiling.get(name)
        if cap not in (None, -1) and (hard == -1 or hard > cap):
            too_high.append(f"{name} {hard} > {cap}")
    if not too_high:
        return Check("ulimits", "ok", "requested ulimits are grantable")
    raise_them = "raise the engine's limits (e.g. LimitMEMLOCK=infinity for dockerd)"
    what = "clamped for the emulator" if emulate else raise_them
    why = f"the engine cannot grant {', '.join(too_high)}: {what}"
    return Check("ulimits", "warn" if emulate else "fail", why)


def shm_check(r: Resolved, shm_path: str = "/dev/shm") -> list[Check]:
    need = rules.shm_need_bytes(r)
    free = _free_if_nothing_to_warn(shm_path, need)
    report = None
    if free is None:
        try:
            report = scan.scan(shm_path, container_labels=lambda cid: None)
        except ComposegenError as exc:
            return [Check("shm", "warn", f"could not scan {shm_path}: {exc.message}")]
        free = report.filesystem.free_bytes
    where = "the host's /dev/shm (ipc: host)" if r.profile.service.ipc == "host" else shm_path
    has, needs = format_gib(free / GIB, 1), format_gib(need / GIB, 1)
    if r.profile.service.ipc == "host" and free < need:
        why = f"{where} has {has} free; this profile needs {needs} (KV offload + headroom)"
        out = [Check("shm", "fail", why)]
    else:
        out = [Check("shm", "ok", f"{where}: {has} free, needs {needs}")]
    reclaim = " — `composegen shm reclaim` or `up --reclaim-shm`"
    warnings = scan.check_budget(report, need, LEFTOVER_WARN_BYTES) if report else []
    return out + [Check("shm-leftovers", "warn", warning + reclaim) for warning in warnings]


def _free_if_nothing_to_warn(shm_path: str, need: int) -> int | None:
    """The free bytes when the scan could not warn: NEED fits and the whole filesystem uses less
    than the leftover bound, so no leftover can exceed it. The scan's slow part — every process's
    open files, to tell leftovers from files in use — is then not needed. None: scan (its figures,
    its warnings)."""
    if not (os.path.isdir(shm_path) and os.access(shm_path, os.R_OK | os.X_OK)):
        return None  # the scan says why
    try:
        vfs = os.statvfs(shm_path)
    except OSError:
        return None
    total, free = vfs.f_blocks * vfs.f_frsize, vfs.f_bavail * vfs.f_frsize
    used = total - vfs.f_bfree * vfs.f_frsize  # as the scan's report counts it
    return free if need <= free and used <= LEFTOVER_WARN_BYTES else None


def node_checks(
    dep: Deployment, n: NodeRef, image: str | None, emulate: bool
) -> tuple[list[Check], dict[str, int] | None]:
    """GPU runtime, host ports (the API, and the master port on a multi-node head), /dev/shm and
    ulimits of one node whose engine answered; `image` is None when it is not on that engine (then
    what needs a probe container is skipped: the image check already failed). Returns the checks and
    the engine's rlimit ceiling (None without ulimits)."""
    r, svc = dep.r, dep.r.profile.service
    checks = [_named(attempt("gpus", lambda: gpu_check(emulate, n.target)), n)]
    ports = _ports(dep, n)
    if n.target.is_local:
        free = {(h, p): port_free(h, p) for h, p, _ in ports}
        checks += [_named(c, n) for c in shm_check(r)]
    elif image is None:
        return checks, None
    else:
        try:
            probe = hostprobe.host_probe(image, n.project, n.target, [(h, p) for h, p, _ in ports])
        except ComposegenError as exc:
            return [*checks, Check(n.named("host"), "fail", exc.message)], None
        free = {(item["host"], item["port"]): item["free"] for item in probe["ports"]}
        checks += _remote_shm_checks(r, n, probe["shm"])
    where = f" on {n.target.label}" if n.member else ""
    knobs = {"host": "service.port.host", "master": "nodes.master_port"}
    for host, port, what in ports:
        if free[(host, port)]:
            checks.append(Check(n.named("port"), "ok", f"{what} port {host}:{port} is free{where}"))
            continue
        who = portowner.conflict(port, n.target, knobs.get(what, "monitoring.port"))
        why = f"{what} port {host}:{port} is already in use{where}: {who}"
        checks.append(Check(n.named("port"), "fail", why))
    ceiling = None
    ulimits = svc.ulimits_plain()
    if ulimits and image is not None:
        try:
            ceiling = enginecache.rlimits(image, n.project, n.target)
            checks.append(_named(ulimit_check(ulimits, ceiling, emulate), n))
        except ComposegenError as exc:
            checks.append(Check(n.named("ulimits"), "fail", exc.message))
    return checks, ceiling


def _ports(dep: Deployment, n: NodeRef) -> list[tuple[str, int, str]]:
    """(host, port, what) a node's stack will publish or listen on."""
    p = dep.r.profile
    if n.rank != 0:
        return []
    # Behind the edge the stack publishes nothing: its host port is the edge's loopback operator door.
    ports = [] if dep.behind_edge else [(p.service.port.bind, p.service.port.host, "host")]
    if p.nodes is not None:  # torch's store listens on every interface
        every = "::" if ":" in p.nodes.master_addr else "0.0.0.0"
        ports.append((every, p.nodes.master_port, "master"))
    if p.monitoring.prometheus:  # Prometheus' UI, published on the head's loopback
        ports.append(("127.0.0.1", p.monitoring.port, "prometheus"))
    return ports


def _named(check: Check, n: NodeRef) -> Check:
    return Check(n.named(check.name), check.status, check.message)


def _remote_shm_checks(r: Resolved, n: NodeRef, report: hostprobe.ShmListing) -> list[Check]:
    need, free = rules.shm_need_bytes(r), report["free_bytes"]
    status = "fail" if r.profile.service.ipc == "host" and free < need else "ok"
    shown = f"/dev/shm: {format_gib(free / GIB, 1)} free, needs {format_gib(need / GIB, 1)}"
    out = [Check(n.named("shm"), status, shown)]
    known = [e for e in report["entries"] if scan.match_pattern(e["name"])]
    size = sum(e["bytes"] for e in known)
    if known and size > LEFTOVER_WARN_BYTES:
        files = (
            f"{len(known)} files named like vLLM/NCCL/PyTorch leftovers use {size / 2**20:.0f} MiB"
        )
        unchecked = "holders are not checked on a remote host — run `composegen shm` there"
        out.append(Check(n.named("shm-leftovers"), "warn", f"{files}; {unchecked}"))
    return out


def reclaim_shm(path: str = "/dev/shm", min_age: float = 60.0) -> Check:
    """`up --reclaim-shm`: remove leftovers first — but never past processes whose holdings could
    not be read (then a warning says how to reclaim by hand once they are checked)."""
    from composegen.shm import reclaim  # why: ~20 ms of import, only for `up --reclaim-shm`

    try:
        result = reclaim.reclaim(path, yes=True, min_age=min_age)  # recently changed files stay
    except BadInput as exc:  # e.g. /dev/shm is not a tmpfs on this host
        return Check("shm-reclaim", "warn", f"{exc.message}; nothing reclaimed")
    except CheckFailed as exc:
        by_hand = (
            "`composegen shm reclaim --yes --ignore-unreadable` once those processes are checked"
        )
        return Check("shm-reclaim", "warn", f"{exc.message}; nothing reclaimed — {by_hand}")
    fresh = sum(1 for s in result.skipped if s.reason.startswith("changed "))
    done = f"reclaimed {len(result.removed)} leftover file(s), {result.bytes_freed} bytes"
    left = f"; {fresh} changed in the last {result.min_age_seconds:g}s left alone" if fresh else ""
    return Check("shm-reclaim", "ok", done + left)
