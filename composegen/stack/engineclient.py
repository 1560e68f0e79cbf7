"""The docker SDK's client of an engine (cached per target), its `docker info`, container logs and
the lookups composegen.shm is handed; engine.py re-exports these beside the rest of the SDK calls.
Every failure leaves as an EngineError with the engine's own reason."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from composegen.errors import BadInput, ComposegenError, EngineError
from composegen.stack import compose, sshconn
from composegen.stack.compose import one_line
from composegen.stack.facts import ContainerFacts, stamped_chunks
from composegen.stack.targets import DEFAULT, Target
from composegen.vllm import redact


def api_timeout() -> float:
    """Seconds one engine API call may take (COMPOSEGEN_ENGINE_TIMEOUT, default 30): a frozen
    engine, local or behind ssh, fails within it instead of hanging."""
    raw = os.environ.get("COMPOSEGEN_ENGINE_TIMEOUT", "")
    try:
        value = float(raw) if raw else 30.0
    except ValueError:
        raise BadInput(f"COMPOSEGEN_ENGINE_TIMEOUT: expected seconds, got {raw!r}") from None
    if not 0 < value < 86400:  # also refuses nan and inf
        raise BadInput(f"COMPOSEGEN_ENGINE_TIMEOUT: expected 0 < seconds < 86400, got {raw!r}")
    return value


def target_url(target: Target) -> str | None:
    """The engine URL a node names: its docker_host, or what its context points at."""
    return target.host or (compose.context_host(target.context) if target.context else None)


def sdk_module() -> Any:
    """`import docker`, without its ssh:// transport unless the default engine may be over ssh.

    The SDK loads paramiko (~40% of its import) only for ssh:// URLs and treats it as optional.
    composegen reaches every ssh node through its own forwarded socket (sshconn.py), so only a
    DOCKER_HOST or context of the default engine can need it. A None in sys.modules makes that one
    import fail, then goes."""
    if "docker" in sys.modules:
        return sys.modules["docker"]
    ssh = os.environ.get("DOCKER_HOST", "").startswith("ssh:") or compose.context_in_effect()
    if ssh or "paramiko" in sys.modules:
        import docker

        return docker
    sys.modules["paramiko"] = None  # type: ignore[assignment]
    try:
        import docker
    finally:
        del sys.modules["paramiko"]
    return docker


def _sdk(target: Target) -> Any:
    try:
        docker = sdk_module()
    except ImportError as exc:  # pragma: no cover - a dependency
        raise EngineError(f"the docker SDK is not installed: {exc}") from None
    tried = ""
    try:
        if target == DEFAULT:
            url, tried = compose.default_engine()
            kw = {"timeout": api_timeout()}
            sdk = docker.DockerClient(base_url=url, **kw) if url else docker.from_env(**kw)
        else:
            # ssh:// through one forwarded socket per node for the whole command (stack/sshconn.py).
            url = sshconn.local_url(target_url(target) or "")
            tls = _context_tls(target.context) if target.context else False
            sdk = docker.DockerClient(base_url=url, timeout=api_timeout(), tls=tls)
        sdk.ping()
    except EngineError:
        raise
    except Exception as exc:
        where = f" at {target.label}" if target != DEFAULT else f" at {tried}" if tried else ""
        raise EngineError(
            f"Docker engine{where} unreachable ({one_line(exc)})",
            hint="`composegen provision` starts it (as root), or set DOCKER_HOST; `composegen doctor` checks"
            if target == DEFAULT
            else "check the node's docker_host/context and that its engine runs",
        ) from None
    return sdk


def _context_tls(name: str) -> Any:
    """TLS settings of a context (tcp:// with certificates), or False."""
    try:
        ContextAPI = sdk_module().context.ContextAPI

        ctx = ContextAPI.get_context(name)
        return (ctx.TLSConfig if ctx is not None else None) or False
    except Exception:
        return False


_clients: dict[tuple[Target, str | None, str | None], Any] = {}
_clients_lock = threading.Lock()


def client(target: Target | None = None) -> Any:
    """The SDK client of an engine (cached once it answered; a failure is retried next call)."""
    key = _cache_key(target or DEFAULT)
    with _clients_lock:
        if key not in _clients:
            _clients[key] = _sdk(target or DEFAULT)
        return _clients[key]


def _cache_key(target: Target) -> tuple[Target, str | None, str | None]:
    """The default engine is whatever DOCKER_HOST / DOCKER_CONTEXT name now: a process that changes
    them (a test calling main() in-process) must not be answered by the engine they named before."""
    if target != DEFAULT:
        return target, None, None
    return target, os.environ.get("DOCKER_HOST"), os.environ.get("DOCKER_CONTEXT")


def unless_gone(call: Callable[[], Any], what: str) -> Any:
    """CALL's answer, or None when its object is gone (NotFound, ImageNotFound) or going (DYING); any
    other refusal of the engine is EngineError `WHAT: reason`."""
    docker = sdk_module()
    try:
        return call()
    except docker.errors.NotFound:
        return None
    except docker.errors.APIError as exc:
        if exc.status_code == 409 and any(s in str(exc) for s in DYING):
            return None  # being removed (another command's `down`): as good as gone
        raise EngineError(f"{what}: {one_line(exc)}") from None


# the engine's 409 answers about a container on its way out (`docker logs` of one that `docker rm`
# is removing: "can not get logs from container which is dead or marked for removal")
DYING = ("marked for removal", "removal of container", "is dead")


def preload() -> None:
    """Import the docker SDK now (a caller can hold Ctrl-C meanwhile; see interrupts.py)."""
    sdk_module()


# `docker info` costs the engine ~20 ms; one `up` asks it three times within a second
INFO_FRESH_S = 5.0
_infos: dict[tuple[Target, str | None, str | None], tuple[float, dict[str, Any]]] = {}


def engine_info(target: Target | None = None) -> dict[str, Any]:
    """`docker info` of that engine; an answer younger than INFO_FRESH_S is given again (its ID,
    version, runtimes, cgroups change only with a restart, which also breaks the client)."""
    key = _cache_key(target or DEFAULT)
    seen = _infos.get(key)
    if seen is not None and 0 <= time.monotonic() - seen[0] < INFO_FRESH_S:
        return dict(seen[1])
    info = client(target).info()
    _infos[key] = (time.monotonic(), info)
    return dict(info)


def logs(ctr: ContainerFacts, tail: int | str = "all", timestamps: bool = False) -> str:
    def read() -> bytes:
        api = client(ctr.target).api
        return api.logs(ctr.id, stdout=True, stderr=True, tail=tail, timestamps=timestamps)

    raw = unless_gone(read, f"docker logs {ctr.name}")
    return redact.mask(raw.decode("utf-8", "replace")) if raw is not None else ""


def follow_logs(ctr: ContainerFacts, tail: int | str = "all") -> Iterator[bytes]:
    """The container's output as it is written, until it stops (whole lines, secrets masked)."""
    pending = b""
    for chunk in client(ctr.target).api.logs(
        ctr.id, stdout=True, stderr=True, stream=True, follow=True, tail=tail
    ):
        pending += chunk
        whole, sep, pending = pending.rpartition(b"\n")
        if sep:
            yield redact.mask((whole + sep).decode("utf-8", "replace")).encode("utf-8")
    if pending:
        yield redact.mask(pending.decode("utf-8", "replace")).encode("utf-8")


class LogStream:
    """A container's log as (Docker's timestamp, line) until it stops, goes or `close()` is called
    (from another thread). A read that times out (a long silent stretch) resumes where it was."""

    def __init__(self, ctr: ContainerFacts, tail: int | str = "all") -> None:
        self.ctr, self.tail = ctr, tail
        self._stream: Any = None
        self._closed = False

    def lines(self) -> Iterator[tuple[float | None, str]]:
        docker = sdk_module()

        since: float | None = None
        while not self._closed:
            try:
                opts = {"since": since} if since else {"tail": self.tail}
                opts.update(stdout=True, stderr=True, stream=True, follow=True, timestamps=True)
                self._stream = client(self.ctr.target).api.logs(self.ctr.id, **opts)
                for stamp, text in stamped_chunks(self._stream):
                    if since is None or (stamp is not None and stamp > since):
                        since = stamp if stamp is not None else since
                        yield stamp, redact.mask(text)
                return  # the container stopped: the stream ended
            except (docker.errors.NotFound, EngineError):
                return
            except Exception:  # a read timeout on a quiet log, or close() from another thread
                if self._closed or _gone(self.ctr):
                    return

    def close(self) -> None:
        self._closed = True
        stream = self._stream
        if stream is not None:
            with contextlib.suppress(Exception):  # already closed by the engine
                stream.close()


def _gone(ctr: ContainerFacts) -> bool:
    call = lambda: client(ctr.target).api.inspect_container(ctr.id)  # noqa: E731
    return unless_gone(call, f"docker inspect {ctr.name}") is None


# /dev/shm: injected into composegen.shm by the CLI (shm ranks below stack)


def shm_facts(name_or_id: str, target: Target | None = None) -> dict[str, Any]:
    """What `composegen shm --container` needs to read a container's /dev/shm through /proc: {id,
    name, pid, running, status, ipc_mode, shm_size_bytes}. BadInput for no such container."""
    docker = sdk_module()
    try:
        a = client(target).api.inspect_container(name_or_id)
    except docker.errors.NotFound:
        raise BadInput(f"{name_or_id}: container: no such container") from None
    except docker.errors.APIError as exc:
        raise EngineError(f"docker inspect {name_or_id}: {one_line(exc)}") from None
    state, host = a.get("State") or {}, a.get("HostConfig") or {}
    return {
        "id": a["Id"],
        "name": a.get("Name", "").lstrip("/"),
        "pid": state.get("Pid") or None,
        "running": bool(state.get("Running")),
        "status": state.get("Status"),
        "ipc_mode": host.get("IpcMode"),
        "shm_size_bytes": host.get("ShmSize"),
    }


def container_labels(container_id: str, target: Target | None = None) -> dict[str, str] | None:
    """A container's labels (the compose project holding a /dev/shm file); None once gone."""
    a = unless_gone(
        lambda: client(target).api.inspect_container(container_id),
        f"docker inspect {container_id[:12]}",
    )
    return dict((a.get("Config") or {}).get("Labels") or {}) if a is not None else None


def label_lookup(target: Target | None = None) -> Callable[[str], dict[str, str] | None]:
    """container id -> labels | None, for composegen.shm's scans; never raises: once the engine
    fails, every further id gets None (a scan must not wait on a dead engine per holder)."""
    cache: dict[str, dict[str, str] | None] = {}
    down: list[ComposegenError] = []

    def lookup(container_id: str) -> dict[str, str] | None:
        if container_id not in cache:
            try:
                cache[container_id] = None if down else container_labels(container_id, target)
            except ComposegenError as exc:
                down.append(exc)
                cache[container_id] = None
        return cache[container_id]

    return lookup


# ---- named volumes (the compile caches: stack/caches.py) -----------------------------------------


class Volume(NamedTuple):
    name: str
    labels: dict[str, str]
    created: str | None
    bytes: int | None  # the engine's `system df` figure; None: unknown
    users: list[str]  # containers (running or not) mounting it


def volumes(prefix: str, target: Target | None = None) -> list[Volume]:
    """The named volumes called PREFIX…."""
    sdk = client(target)
    try:
        df = {v["Name"]: (v.get("UsageData") or {}).get("Size", -1) for v in sdk.df()["Volumes"]}
        users = [(c, m.get("Name")) for c in sdk.api.containers(all=True) for m in c["Mounts"]]
        rows = (sdk.api.volumes(filters={"name": prefix}) or {}).get("Volumes") or []
    except sdk_module().errors.APIError as exc:
        raise EngineError(
            f"docker volume ls on {(target or DEFAULT).label}: {one_line(exc)}"
        ) from None
    return [
        Volume(
            n,
            v.get("Labels") or {},
            v.get("CreatedAt"),
            df[n] if df.get(n, -1) >= 0 else None,
            [c["Names"][0][1:] for c, m in users if m == n],
        )
        for v in rows
        if (n := v["Name"]).startswith(prefix)
    ]


def create_volume(name: str, labels: dict[str, str], target: Target | None = None) -> None:
    unless_gone(
        lambda: client(target).api.create_volume(name, labels=labels),
        f"docker volume create {name}",
    )


def volume_present(name: str, target: Target | None = None) -> bool:
    return bool(unless_gone(lambda: client(target).api.inspect_volume(name), f"volume {name}"))


def remove_volume(name: str, target: Target | None = None) -> None:
    unless_gone(lambda: client(target).api.remove_volume(name), f"docker volume rm {name}")


@contextlib.contextmanager
def read_volume(
    volume: str, image: str, labels: dict[str, str], target: Target | None = None
) -> Iterator[Iterator[bytes]]:
    """VOLUME's files as the engine's tar stream (names under `composegen-src/`), read through a
    container created with it mounted read-only, never started, removed afterwards."""
    sdk, docker = client(target), sdk_module()
    config = sdk.api.create_host_config(binds={volume: {"bind": "/composegen-src", "mode": "ro"}})
    cid = None
    try:
        cid = sdk.api.create_container(image, ["true"], labels=labels, host_config=config)["Id"]
        yield sdk.api.get_archive(cid, "/composegen-src")[0]
    except (docker.errors.APIError, docker.errors.ImageNotFound) as exc:
        raise EngineError(f"reading volume {volume}: {one_line(exc)}") from None
    finally:
        if cid is not None:
            with contextlib.suppress(docker.errors.APIError):
                sdk.api.remove_container(cid, force=True)
