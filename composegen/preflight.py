"""What must be true before `up`: each check says ok, warn or fail with a clear message."""
from __future__ import annotations

import socket
from dataclasses import asdict, dataclass

from composegen import engine, rules
from composegen.errors import ComposegenError
from composegen.profile import Resolved

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


def _try(name: str, fn) -> Check:
    try:
        result = fn()
    except ComposegenError as exc:
        return Check(name, "fail", exc.message + (f" (hint: {exc.hint})" if exc.hint else ""))
    return result if isinstance(result, Check) else Check(name, "ok", str(result))


def engine_checks() -> list[Check]:
    return [
        _try("engine", lambda: f"Docker {engine.engine_info().get('ServerVersion', '?')} reachable"),
        _try("compose", lambda: f"docker compose {engine.compose_version()}"),
    ]


def gpu_check(emulate: bool) -> Check:
    if emulate:
        return Check("gpus", "ok", "emulated: GPU reservations removed")
    runtimes = engine.engine_info().get("Runtimes", {})
    if "nvidia" in runtimes:
        return Check("gpus", "ok", "nvidia runtime registered with the engine")
    return Check("gpus", "fail", "the engine has no nvidia runtime; install nvidia-container-toolkit (or use --emulate)")


def port_check(r: Resolved) -> Check:
    p = r.profile.service.port
    if port_free(p.bind, p.host):
        return Check("port", "ok", f"{p.bind}:{p.host} is free")
    return Check("port", "fail", f"host port {p.bind}:{p.host} is already in use")


def image_check(image: str, emulate: bool) -> Check:
    if engine.image_present(image):
        return Check("image", "ok", f"{image} present")
    if emulate:
        return Check("image", "fail", f"emulator image {image} is missing")
    engine.pull(image)  # raises a clear EngineError when no registry answers
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
    what = "clamped for the emulator" if emulate else "raise the engine's limits (e.g. LimitMEMLOCK=infinity for dockerd)"
    return Check("ulimits", status, f"the engine cannot grant {', '.join(too_high)}: {what}")


def shm_check(r: Resolved, shm_path: str = "/dev/shm") -> list[Check]:
    from composegen import shm

    need = rules.shm_need_bytes(r)
    try:
        report = shm.scan(shm_path, container_labels=lambda cid: None)
    except ComposegenError as exc:
        return [Check("shm", "warn", f"could not scan {shm_path}: {exc.message}")]
    out = []
    free = report["filesystem"]["free_bytes"]
    where = "the host's /dev/shm (ipc: host)" if r.profile.service.ipc == "host" else shm_path
    if r.profile.service.ipc == "host" and free < need:
        out.append(Check("shm", "fail", f"{where} has {free / 2**30:.1f} GiB free; this profile needs {need / 2**30:.1f} GiB (KV offload + headroom)"))
    else:
        out.append(Check("shm", "ok", f"{where}: {free / 2**30:.1f} GiB free, needs {need / 2**30:.1f} GiB"))
    for warning in shm.check_budget(report, need, LEFTOVER_WARN_BYTES):
        out.append(Check("shm-leftovers", "warn", warning + " — `composegen shm --reclaim` or `up --reclaim-shm`"))
    return out
