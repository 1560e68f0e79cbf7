"""The Docker engine through the docker SDK: inspection, images, probe containers, logs (one HTTP
call on the socket instead of a CLI process per poll). Its sibling compose.py runs the docker CLI as
processes (`docker compose`, `docker context inspect`); no other module runs docker. Every failure
leaves here as an EngineError with the engine's own reason; nothing else in composegen imports
docker, and no SDK object leaves this module: callers get `ContainerFacts`, `NetworkFacts` and
`ImageFacts` (facts.py). What needs no docker lives beside it: facts.py (those values, parsed from
the API's answers) and hostprobe.py (the probe scripts run through `run_probe`).

Engines are addressed by a `Target` (see targets.py); no target means the default engine.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from composegen.errors import BadInput, ComposegenError, EngineError
from composegen.stack import compose, sshconn
from composegen.stack.compose import one_line
from composegen.stack.facts import (
    ContainerFacts,
    ImageFacts,
    NetworkFacts,
    parse_container,
    parse_image,
    parse_network,
    stamped_chunks,
)
from composegen.stack.targets import DEFAULT, Target
from composegen.vllm import redact

BASE_IMAGE = os.environ.get("COMPOSEGEN_BASE_IMAGE", "composegen/base:py3")
PROBE_LABEL = "io.composegen.probe"  # value: the profile whose `up` ran the probe


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


def _import_sdk() -> Any:
    """`import docker`, without its ssh:// transport unless the default engine may be reached over
    ssh.

    The SDK loads paramiko only for ssh:// URLs and treats it as optional (an ImportError leaves
    that transport out); paramiko and what it pulls in cost ~40% of importing the SDK. composegen
    reaches every ssh node through its own forwarded socket (sshconn.py), so only a DOCKER_HOST or
    docker context of the default engine can need it. A None entry in sys.modules makes that one
    import fail, then goes.
    """
    if "docker" in sys.modules:
        return sys.modules["docker"]
    ssh_possible = (os.environ.get("DOCKER_HOST") or "").startswith(
        "ssh:"
    ) or compose.context_in_effect()
    if ssh_possible or "paramiko" in sys.modules:
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
        docker = _import_sdk()
    except ImportError as exc:  # pragma: no cover - a dependency
        raise EngineError(f"the docker SDK is not installed: {exc}") from None
    tried = ""
    try:
        if target == DEFAULT:
            url, tried = compose.default_engine()
            sdk = (
                docker.DockerClient(base_url=url, timeout=api_timeout())
                if url
                else docker.from_env(timeout=api_timeout())
            )
        else:
            # ssh:// through one forwarded socket per node for the whole command (stack/sshconn.py).
            url = sshconn.local_url(target_url(target) or "")
            tls = _context_tls(target.context) if target.context else False
            sdk = docker.DockerClient(base_url=url, timeout=api_timeout(), tls=tls)
        sdk.ping()
    except EngineError:
        raise
    except Exception as exc:
        where = (
            f" at {tried}"
            if target == DEFAULT and tried
            else ""
            if target == DEFAULT
            else f" at {target.label}"
        )
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
        ContextAPI = _import_sdk().context.ContextAPI

        ctx = ContextAPI.get_context(name)
        return (ctx.TLSConfig if ctx is not None else None) or False
    except Exception:
        return False


_clients: dict[tuple[Target, str | None, str | None], Any] = {}
_clients_lock = threading.Lock()


def _client(target: Target | None = None) -> Any:
    """The SDK client of an engine (cached once it answered; a failure is retried on the next
    call)."""
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


def _unless_gone(call: Callable[[], Any], what: str) -> Any:
    """CALL's answer, or None when its object is gone (NotFound, ImageNotFound) or going (DYING); any
    other refusal of the engine is EngineError `WHAT: reason`."""
    docker = _import_sdk()

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
    """Import the docker SDK now (a caller can hold Ctrl-C meanwhile; see cli/interrupts.py)."""
    _import_sdk()


# `docker info` costs the engine ~20 ms; one `up` asks it three times within a second
INFO_FRESH_S = 5.0
_infos: dict[tuple[Target, str | None, str | None], tuple[float, dict[str, Any]]] = {}


def engine_info(target: Target | None = None) -> dict[str, Any]:
    """`docker info` of that engine; an answer younger than INFO_FRESH_S is given again (what it
    holds — ID, version, runtimes, cgroups — changes only with a restart, which also breaks the
    client)."""
    key = _cache_key(target or DEFAULT)
    seen = _infos.get(key)
    if seen is not None and 0 <= time.monotonic() - seen[0] < INFO_FRESH_S:
        return dict(seen[1])
    info = _client(target).info()
    _infos[key] = (time.monotonic(), info)
    return dict(info)


# ---- images -------------------------------------------------------------------------------------


def image_facts(ref: str, target: Target | None = None) -> ImageFacts | None:
    """The image on that engine (`docker image inspect`), None when absent."""
    where = f"docker image inspect {ref} on {(target or DEFAULT).label}"
    a = _unless_gone(lambda: _client(target).api.inspect_image(ref), where)
    return parse_image(a) if a is not None else None


def image_present(ref: str, target: Target | None = None) -> bool:
    return image_facts(ref, target) is not None


def image_id(ref: str, target: Target | None = None) -> str | None:
    """The image's content digest on that engine (`docker image inspect --format {{.Id}}`), None if
    absent."""
    facts = image_facts(ref, target)
    return facts.id if facts else None


def copy_image(ref: str, source: Target, dest: Target) -> None:
    """`docker save | docker load` from one engine to another: the image keeps its ID (a rebuild
    would not). The tar streams from one engine to the other (chunked upload); it is never held
    whole in memory."""
    docker = _import_sdk()

    try:
        _client(dest).images.load(_client(source).images.get(ref).save(named=True))
    except docker.errors.APIError as exc:
        raise EngineError(
            f"copying {ref} from {source.label} to {dest.label}: {one_line(exc)}"
        ) from None


PullListener = Callable[[str, str, int | None, int | None], None]  # (layer, status, current, total)


def pull(ref: str, target: Target | None = None, on_event: PullListener | None = None) -> None:
    """Pull an image, reporting the engine's progress events (one per layer update) as they
    stream."""
    docker = _import_sdk()
    parse_repository_tag = docker.utils.parse_repository_tag

    repo, tag = parse_repository_tag(ref)
    try:
        for event in _client(target).api.pull(repo, tag=tag or "latest", stream=True, decode=True):
            if "error" in event:
                raise docker.errors.APIError(str(event["error"]))
            detail = event.get("progressDetail") or {}
            if on_event is not None:
                on_event(
                    str(event.get("id", "")),
                    str(event.get("status", "")),
                    detail.get("current"),
                    detail.get("total"),
                )
    except docker.errors.APIError as exc:
        raise EngineError(
            f"image {ref} is not present and could not be pulled: {one_line(exc)}",
            hint="pull it where a registry answers, or `docker load` it",
        ) from None


def build_emulator_image(base: str = BASE_IMAGE, target: Target | None = None) -> str:
    """Build (once per content hash) the emulator image from composegen/emulator."""
    import tempfile

    docker = _import_sdk()

    # why: only `up --emulate` builds it; cli/fastpath imports engine
    from composegen.stack import emulatorimage as image

    tag = image.image_tag()
    if image_present(tag, target):
        return tag
    if not image_present(base, target):
        raise EngineError(
            f"base image {base} is missing",
            hint="`composegen provision` makes it (or set COMPOSEGEN_BASE_IMAGE); `composegen doctor` checks",
        )
    source = {EMULATOR_SOURCE_LABEL: str(Path(image.__file__).resolve().parent)}
    with tempfile.TemporaryDirectory(prefix="composegen-emulator-") as tmp:
        ctx = image.build_context(Path(tmp))
        try:
            _client(target).images.build(
                path=str(ctx), tag=tag, buildargs={"BASE": base}, rm=True, pull=False, labels=source
            )
        except (docker.errors.BuildError, docker.errors.APIError) as exc:
            raise EngineError(f"building the emulator image failed: {one_line(exc)}") from None
    _prune_old_emulators(tag, source[EMULATOR_SOURCE_LABEL], target)
    return tag


def build_image(
    tag: str, context: Path, buildargs: dict[str, str], what: str, target: Target | None = None
) -> str:
    """Build TAG from a prepared context directory, never pulling (the edge's local image)."""
    docker = _import_sdk()

    base = buildargs.get("BASE")
    if base and not image_present(base, target):
        raise EngineError(f"base image {base} is missing", hint="`composegen provision` makes it")
    try:
        _client(target).images.build(
            path=str(context), tag=tag, buildargs=buildargs, rm=True, pull=False
        )
    except (docker.errors.BuildError, docker.errors.APIError) as exc:
        raise EngineError(f"building {what} failed: {one_line(exc)}") from None
    return tag


# The emulator package an image was built from: pruning stays within one checkout or install.
EMULATOR_SOURCE_LABEL = "io.composegen.emulator-source"


def _prune_old_emulators(keep: str, source: str, target: Target | None) -> None:
    """Each emulator change makes a new content-hash tag; drop the older ones no container uses.
    Only images built from this same emulator source: another checkout or install sharing the
    engine builds its own tag, and may be between two stacks that need it (no container holds it)."""
    docker = _import_sdk()

    repo = keep.rsplit(":", 1)[0]
    sdk = _client(target)
    in_use = {c["ImageID"] for c in sdk.api.containers(all=True)}
    for old in sdk.images.list(name=repo, filters={"label": f"{EMULATOR_SOURCE_LABEL}={source}"}):
        if keep not in old.tags and old.id not in in_use:
            # In use by a build or another engine user: keep it, try again next time.
            with contextlib.suppress(docker.errors.APIError):
                sdk.images.remove(old.id, noprune=False)


# ---- probe containers: labelled, always removed
# ---------------------------------------------------


def run_probe(
    image: str, argv: list[str], owner: str, target: Target | None = None, **host_config: Any
) -> str:
    """Run `python3 ARGV` in a throw-away container labelled io.composegen.probe=OWNER and return
    its stdout. The container is removed however this ends (Ctrl-C included); one that an interrupt
    leaves between create and remove still carries the label, and `composegen down OWNER` removes
    it."""

    sdk = _client(target)
    where = (target or DEFAULT).label
    cid = None
    try:
        cid = _create_probe(sdk, image, argv, owner, host_config)
        sdk.api.start(cid)
        code = sdk.api.wait(cid, timeout=120).get("StatusCode")
        out = sdk.api.logs(cid, stdout=True, stderr=code != 0).decode("utf-8", "replace")
    # the engine's refusal, or a timeout of the wait: the engine stopped answering
    except Exception as exc:
        raise EngineError(f"probe container with {image} on {where}: {one_line(exc)}") from None
    finally:
        if cid is not None:
            _remove_quietly(sdk, cid)
    if code != 0:
        raise EngineError(
            f"probe container with {image} on {where} exited {code}: {out.strip()[-300:]}"
        )
    return out


def _create_probe(
    sdk: Any, image: str, argv: list[str], owner: str, host_config: dict[str, Any]
) -> str:
    """Create (not start) a `python3 ARGV` probe container labelled io.composegen.probe=OWNER; its
    id."""
    return sdk.api.create_container(
        image,
        argv,
        entrypoint="python3",
        labels={PROBE_LABEL: owner},
        host_config=sdk.api.create_host_config(**host_config),
    )["Id"]


def start_probe(
    image: str, argv: list[str], owner: str, target: Target | None = None, **host_config: Any
) -> ContainerFacts:
    """Start `python3 ARGV` in a probe container (labelled like run_probe's) and return at once: for
    a probe that streams its answer on stdout (read it with LogStream; remove it with
    remove_container)."""
    docker = _import_sdk()

    sdk = _client(target)
    where = target or DEFAULT
    cid = None
    try:
        cid = _create_probe(sdk, image, argv, owner, host_config)
        sdk.api.start(cid)
        return parse_container(sdk.api.inspect_container(cid), where)
    except (docker.errors.APIError, docker.errors.ImageNotFound) as exc:
        if cid is not None:
            _remove_quietly(sdk, cid)
        raise EngineError(
            f"probe container with {image} on {where.label}: {one_line(exc)}"
        ) from None


def _remove_quietly(sdk: Any, cid: str) -> None:
    docker = _import_sdk()

    try:
        sdk.api.remove_container(cid, force=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError:
        pass  # already being removed


def probe_containers(owner: str, target: Target | None = None) -> list[ContainerFacts]:
    return _list({"label": f"{PROBE_LABEL}={owner}"}, target)


# ---- compose projects, containers, networks
# ---------------------------------------------------------


def _list(filters: dict[str, Any], target: Target | None) -> list[ContainerFacts]:
    docker = _import_sdk()

    sdk, where = _client(target), target or DEFAULT
    found = []
    try:
        for row in sdk.api.containers(all=True, filters=filters):
            try:
                found.append(parse_container(sdk.api.inspect_container(row["Id"]), where))
            except docker.errors.NotFound:
                continue  # removed between the listing and the inspect
    except docker.errors.APIError as exc:
        raise EngineError(f"listing containers on {where.label}: {one_line(exc)}") from None
    return found


def project_containers(project: str, target: Target | None = None) -> list[ContainerFacts]:
    return _list({"label": f"com.docker.compose.project={project}"}, target)


def composegen_containers(target: Target | None = None) -> list[ContainerFacts]:
    return _list({"label": "io.composegen.profile"}, target)


def gpu_claims(target: Target | None = None) -> list[dict[str, Any]]:
    """Every running container with what it asks of the GPUs: {"id", "name", "labels",
    "device_requests": [{"driver", "count", "device_ids"}], "env": NVIDIA_VISIBLE_DEVICES or null,
    "runtime"} (campaign exclusive mode)."""
    docker = _import_sdk()

    sdk, where = _client(target), target or DEFAULT
    claims = []
    try:
        for row in sdk.api.containers(filters={"status": "running"}):
            try:
                a = sdk.api.inspect_container(row["Id"])
            except docker.errors.NotFound:
                continue
            requests = (a.get("HostConfig") or {}).get("DeviceRequests") or []
            env = [
                e
                for e in (a.get("Config") or {}).get("Env") or []
                if e.startswith("NVIDIA_VISIBLE_DEVICES=")
            ]
            claims.append(
                {
                    "id": a["Id"],
                    "name": a.get("Name", "").lstrip("/"),
                    "labels": dict((a.get("Config") or {}).get("Labels") or {}),
                    "device_requests": [
                        {
                            "driver": d.get("Driver") or "",
                            "count": d.get("Count"),
                            "device_ids": d.get("DeviceIDs"),
                        }
                        for d in requests
                    ],
                    "env": env[0].split("=", 1)[1] if env else None,
                    "runtime": (a.get("HostConfig") or {}).get("Runtime") or "",
                }
            )
    except docker.errors.APIError as exc:
        raise EngineError(f"listing containers on {where.label}: {one_line(exc)}") from None
    return claims


def port_publishers(port: int, target: Target | None = None) -> list[str]:
    """Names of the running containers that publish this host port (a port conflict names its
    holder)."""
    docker = _import_sdk()

    try:
        listed = _client(target).api.containers()
    except docker.errors.APIError as exc:
        raise EngineError(f"docker ps on {(target or DEFAULT).label}: {one_line(exc)}") from None
    return sorted(
        (c.get("Names") or ["?"])[0].lstrip("/")
        for c in listed
        if any(p.get("PublicPort") == port for p in c.get("Ports") or [])
    )


def inspect(ctr: ContainerFacts) -> ContainerFacts | None:
    """The container's facts now; None once it is gone."""
    a = _unless_gone(
        lambda: _client(ctr.target).api.inspect_container(ctr.id), f"docker inspect {ctr.name}"
    )
    return parse_container(a, ctr.target) if a is not None else None


def wait_exit(ctr: ContainerFacts, timeout: float = 60) -> int | None:
    """Block until the container stops; its exit code."""
    return _client(ctr.target).api.wait(ctr.id, timeout=timeout).get("StatusCode")


def remove_container(ctr: ContainerFacts, grace: int | None = None) -> None:
    """Remove a container (after a graceful stop of `grace` seconds when given); gone already is
    fine."""
    docker = _import_sdk()

    sdk = _client(ctr.target)
    if grace is not None and ctr.running:
        with contextlib.suppress(docker.errors.APIError):
            sdk.api.stop(ctr.id, timeout=grace)
    _remove_quietly(sdk, ctr.id)


def exec_output(ctr: ContainerFacts, argv: list[str], max_bytes: int = 1 << 20) -> tuple[int, str]:
    """Run ARGV in a running container (the edge's `caddy reload`, its root certificate): exit code
    and output, cut at MAX_BYTES; the engine's API deadline bounds it."""

    def run() -> tuple[int, str]:
        result = _client(ctr.target).api.exec_create(ctr.id, argv, stdout=True, stderr=True)
        data = _client(ctr.target).api.exec_start(result["Id"])[:max_bytes]
        code = _client(ctr.target).api.exec_inspect(result["Id"]).get("ExitCode")
        return (code if isinstance(code, int) else -1), data.decode("utf-8", "replace")

    answer = _unless_gone(run, f"docker exec {ctr.name}")
    if answer is None:
        raise EngineError(f"{ctr.name}: the container is gone")
    return answer


def stop_container(ctr: ContainerFacts, grace: int = 1) -> None:
    """`docker stop -t GRACE`: SIGTERM, then SIGKILL after `grace` seconds (the memory guard's
    stop)."""
    _unless_gone(
        lambda: _client(ctr.target).api.stop(ctr.id, timeout=grace), f"docker stop {ctr.name}"
    )


def put_archive(
    image: str, owner: str, target: Target | None, host_dir: str, tar_stream: Any
) -> None:
    """Unpack a tar stream into HOST_DIR on the engine's host (created when missing) through a
    container that is created, never started, with HOST_DIR bind-mounted: the Docker API's copy, no
    ssh or rsync on the node. The stream goes up in chunks; it is never held whole in memory."""
    docker = _import_sdk()

    sdk = _client(target)
    cid = None
    try:
        cid = sdk.api.create_container(
            image,
            ["true"],
            labels={PROBE_LABEL: owner},
            host_config=sdk.api.create_host_config(
                binds={host_dir: {"bind": "/composegen-dest", "mode": "rw"}}
            ),
        )["Id"]
        if not sdk.api.put_archive(cid, "/composegen-dest", tar_stream):
            raise EngineError(
                f"copying into {host_dir} on {(target or DEFAULT).label}: the engine refused the archive"
            )
    except (docker.errors.APIError, docker.errors.ImageNotFound) as exc:
        raise EngineError(
            f"copying into {host_dir} on {(target or DEFAULT).label}: {one_line(exc)}"
        ) from None
    finally:
        if cid is not None:
            _remove_quietly(sdk, cid)


def edge_proxy_running(network: str, target: Target | None = None) -> bool:
    """A running edge proxy (composegen/edge) is attached to NETWORK."""
    filters = {"network": network, "label": "io.composegen.role=edge-proxy", "status": "running"}
    return bool(_client(target).api.containers(filters=filters))


def project_networks(project: str, target: Target | None = None) -> list[NetworkFacts]:
    rows = _client(target).api.networks(filters={"label": f"com.docker.compose.project={project}"})
    return [parse_network(n, target or DEFAULT) for n in rows]


def composegen_networks(target: Target | None = None) -> list[NetworkFacts]:
    """Compose networks of composegen projects (`composegen-*`), with or without containers."""
    where = target or DEFAULT
    rows = _client(target).api.networks(filters={"label": "com.docker.compose.project"})
    return [
        parse_network(n, where)
        for n in rows
        if str((n.get("Labels") or {}).get("com.docker.compose.project", "")).startswith(
            "composegen-"
        )
        # the edge's own (composegen/edge)
        and (n.get("Labels") or {}).get("io.composegen.role") != "edge"
    ]


def remove_network(net: NetworkFacts) -> None:
    _unless_gone(
        lambda: _client(net.target).api.remove_network(net.id), f"docker network rm {net.name}"
    )


# ---- /dev/shm: injected into composegen.shm by the CLI (shm ranks below stack) -------------------


def shm_facts(name_or_id: str, target: Target | None = None) -> dict[str, Any]:
    """What `composegen shm --container` needs to read a container's /dev/shm through /proc: {id,
    name, pid, running, status, ipc_mode, shm_size_bytes}. BadInput when there is no such
    container."""
    docker = _import_sdk()

    try:
        a = _client(target).api.inspect_container(name_or_id)
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
    """A container's labels, to name the compose project holding a /dev/shm file; None once it is
    gone."""
    a = _unless_gone(
        lambda: _client(target).api.inspect_container(container_id),
        f"docker inspect {container_id[:12]}",
    )
    return dict((a.get("Config") or {}).get("Labels") or {}) if a is not None else None


def label_lookup(target: Target | None = None) -> Callable[[str], dict[str, str] | None]:
    """container id -> labels | None, for composegen.shm's scans; never raises: once the engine
    fails to answer, every further id gets None (a scan must not wait on a dead engine per
    holder)."""
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


# ---- logs ---------------------------------------------------------------------------------------


def logs(ctr: ContainerFacts, tail: int | str = "all", timestamps: bool = False) -> str:
    raw = _unless_gone(
        lambda: _client(ctr.target).api.logs(
            ctr.id, stdout=True, stderr=True, tail=tail, timestamps=timestamps
        ),
        f"docker logs {ctr.name}",
    )
    return redact.mask(raw.decode("utf-8", "replace")) if raw is not None else ""


def follow_logs(ctr: ContainerFacts, tail: int | str = "all") -> Iterator[bytes]:
    """The container's output as it is written, until it stops (whole lines, secrets masked)."""
    pending = b""
    for chunk in _client(ctr.target).api.logs(
        ctr.id, stdout=True, stderr=True, stream=True, follow=True, tail=tail
    ):
        pending += chunk
        whole, sep, pending = pending.rpartition(b"\n")
        if sep:
            yield redact.mask((whole + sep).decode("utf-8", "replace")).encode("utf-8")
    if pending:
        yield redact.mask(pending.decode("utf-8", "replace")).encode("utf-8")


class LogStream:
    """Follow a container's log as (Docker's timestamp, line) pairs until it stops, goes away or
    `close()` is called (from another thread). A read that times out (a long silent stretch) resumes
    where it was."""

    def __init__(self, ctr: ContainerFacts, tail: int | str = "all") -> None:
        self.ctr, self.tail = ctr, tail
        self._stream: Any = None
        self._closed = False

    def lines(self) -> Iterator[tuple[float | None, str]]:
        docker = _import_sdk()

        since: float | None = None
        while not self._closed:
            try:
                self._stream = _client(self.ctr.target).api.logs(
                    self.ctr.id, stdout=True, stderr=True, stream=True, follow=True, timestamps=True,
                    **({"since": since} if since else {"tail": self.tail}),
                )  # fmt: skip
                for stamp, text in stamped_chunks(self._stream):
                    if since is None or (stamp is not None and stamp > since):
                        since = stamp if stamp is not None else since
                        yield stamp, redact.mask(text)
                return  # the container stopped: the stream ended
            except (docker.errors.NotFound, EngineError):
                return
            except Exception:  # a read timeout on a quiet log, or close() from another thread
                if self._closed or inspect(self.ctr) is None:
                    return

    def close(self) -> None:
        self._closed = True
        stream = self._stream
        if stream is not None:
            with contextlib.suppress(Exception):  # already closed by the engine
                stream.close()
