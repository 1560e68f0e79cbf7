"""The Docker engine through the docker SDK (one HTTP call on the socket, not a CLI process per
poll): images, probe containers, containers, networks; the client and logs are in engineclient.py.
compose.py runs the docker CLI; no other module runs docker, and no SDK object leaves: callers get
`ContainerFacts`, `NetworkFacts`, `ImageFacts` (facts.py). Every failure leaves as an EngineError
with the engine's own reason. Engines are addressed by a `Target`; none means the default one."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from composegen.errors import EngineError
from composegen.stack.compose import one_line
from composegen.stack.engineclient import (
    LogStream,
    api_timeout,
    client,
    container_labels,
    engine_info,
    follow_logs,
    label_lookup,
    logs,
    preload,
    sdk_module,
    shm_facts,
    target_url,
    unless_gone,
)
from composegen.stack.facts import (
    ContainerFacts,
    ImageFacts,
    NetworkFacts,
    parse_container,
    parse_image,
    parse_network,
)
from composegen.stack.targets import DEFAULT, Target

# engineclient's names are given here too: callers know one docker module
__all__ = ["LogStream", "api_timeout", "container_labels", "engine_info", "follow_logs"]
__all__ += ["label_lookup", "logs", "preload", "shm_facts", "target_url"]

BASE_IMAGE = os.environ.get("COMPOSEGEN_BASE_IMAGE", "composegen/base:py3")
PROBE_LABEL = "io.composegen.probe"  # value: the compose project (a node's) whose `up` ran it
# The emulator package an image was built from: pruning stays within one checkout or install.
EMULATOR_SOURCE_LABEL = "io.composegen.emulator-source"
PullListener = Callable[[str, str, int | None, int | None], None]  # (layer, status, current, total)


# ---- images -------------------------------------------------------------------------------------


def image_facts(ref: str, target: Target | None = None) -> ImageFacts | None:
    """The image on that engine (`docker image inspect`), None when absent."""
    where = f"docker image inspect {ref} on {(target or DEFAULT).label}"
    a = unless_gone(lambda: client(target).api.inspect_image(ref), where)
    return parse_image(a) if a is not None else None


def image_present(ref: str, target: Target | None = None) -> bool:
    return image_facts(ref, target) is not None


def image_id(ref: str, target: Target | None = None) -> str | None:
    facts = image_facts(ref, target)
    return facts.id if facts else None


def copy_image(ref: str, source: Target, dest: Target) -> None:
    """`docker save | docker load` from one engine to another: the image keeps its ID (a rebuild
    would not). The tar streams (chunked upload); it is never held whole in memory."""
    try:
        client(dest).images.load(client(source).images.get(ref).save(named=True))
    except sdk_module().errors.APIError as exc:
        copying = f"copying {ref} from {source.label} to {dest.label}"
        raise EngineError(f"{copying}: {one_line(exc)}") from None


def pull(ref: str, target: Target | None = None, on_event: PullListener | None = None) -> None:
    """Pull an image, reporting the engine's progress events (one per layer update) as they come."""
    docker = sdk_module()
    repo, tag = docker.utils.parse_repository_tag(ref)
    try:
        for event in client(target).api.pull(repo, tag=tag or "latest", stream=True, decode=True):
            if "error" in event:
                raise docker.errors.APIError(str(event["error"]))
            detail = event.get("progressDetail") or {}
            if on_event is not None:
                layer, status = str(event.get("id", "")), str(event.get("status", ""))
                on_event(layer, status, detail.get("current"), detail.get("total"))
    except docker.errors.APIError as exc:
        raise EngineError(
            f"image {ref} is not present and could not be pulled: {one_line(exc)}",
            hint="pull it where a registry answers, or `docker load` it",
        ) from None


def build_emulator_image(base: str = BASE_IMAGE, target: Target | None = None) -> str:
    """Build (once per content hash) the emulator image from composegen/emulator."""
    import tempfile

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
    source = str(Path(image.__file__).resolve().parent)
    with tempfile.TemporaryDirectory(prefix="composegen-emulator-") as tmp:
        ctx = image.build_context(Path(tmp))
        labels = {EMULATOR_SOURCE_LABEL: source}
        build_image(tag, ctx, {"BASE": base}, "the emulator image", target, labels)
    _prune_old_emulators(tag, source, target)
    return tag


def build_image(
    tag: str,
    context: Path,
    buildargs: dict[str, str],
    what: str,
    target: Target | None = None,
    labels: dict[str, str] | None = None,
) -> str:
    """Build TAG from a prepared context directory, never pulling (the edge's local image)."""
    docker = sdk_module()
    base = buildargs.get("BASE")
    if base and not image_present(base, target):
        raise EngineError(f"base image {base} is missing", hint="`composegen provision` makes it")
    try:
        client(target).images.build(
            path=str(context), tag=tag, buildargs=buildargs, rm=True, pull=False, labels=labels
        )
    except (docker.errors.BuildError, docker.errors.APIError) as exc:
        raise EngineError(f"building {what} failed: {one_line(exc)}") from None
    return tag


def _prune_old_emulators(keep: str, source: str, target: Target | None) -> None:
    """Each emulator change makes a new content-hash tag; drop older ones no container uses, built
    from this same source only (another checkout's may be between two stacks that need it)."""
    sdk = client(target)
    in_use = {c["ImageID"] for c in sdk.api.containers(all=True)}
    repo = keep.rsplit(":", 1)[0]
    for old in sdk.images.list(name=repo, filters={"label": f"{EMULATOR_SOURCE_LABEL}={source}"}):
        if keep not in old.tags and old.id not in in_use:
            # In use by a build or another engine user: keep it, try again next time.
            with contextlib.suppress(sdk_module().errors.APIError):
                sdk.images.remove(old.id, noprune=False)


# ---- probe containers: labelled, always removed --------------------------------------------------


def run_probe(
    image: str, argv: list[str], owner: str, target: Target | None = None, **host_config: Any
) -> str:
    """Run `python3 ARGV` in a throw-away container labelled io.composegen.probe=OWNER; its stdout.
    It is removed however this ends (Ctrl-C included); one an interrupt leaves between create and
    remove still carries the label, and `composegen down OWNER` removes it."""
    sdk = client(target)
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
        exited = f"probe container with {image} on {where} exited {code}"
        raise EngineError(f"{exited}: {out.strip()[-300:]}")
    return out


def _create_probe(
    sdk: Any, image: str, argv: list[str], owner: str, host_config: dict[str, Any], **kw: Any
) -> str:
    """Create (not start) a `python3 ARGV` probe container labelled with its OWNER; its id."""
    return sdk.api.create_container(
        image,
        argv,
        labels={PROBE_LABEL: owner},
        host_config=sdk.api.create_host_config(**host_config),
        **({"entrypoint": "python3"} | kw),
    )["Id"]


def start_probe(
    image: str, argv: list[str], owner: str, target: Target | None = None, **host_config: Any
) -> ContainerFacts:
    """Start `python3 ARGV` in a probe container (labelled like run_probe's) and return at once: for
    a probe streaming its answer on stdout (read by LogStream; removed by remove_container)."""
    docker = sdk_module()
    sdk = client(target)
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
    with contextlib.suppress(sdk_module().errors.APIError):  # gone, or already being removed
        sdk.api.remove_container(cid, force=True)


def probe_containers(owner: str, target: Target | None = None) -> list[ContainerFacts]:
    return _list({"label": f"{PROBE_LABEL}={owner}"}, target)


# ---- compose projects, containers, networks ------------------------------------------------------


def _inspected(filters: Mapping[str, object], target: Target | None) -> Iterator[Mapping[str, Any]]:
    """`docker inspect` of every container FILTERS lists (one removed in between is left out)."""
    docker = sdk_module()
    sdk = client(target)
    try:
        for row in sdk.api.containers(all=True, filters=filters):
            with contextlib.suppress(docker.errors.NotFound):
                yield sdk.api.inspect_container(row["Id"])
    except docker.errors.APIError as exc:
        listing = f"listing containers on {(target or DEFAULT).label}"
        raise EngineError(f"{listing}: {one_line(exc)}") from None


def _list(filters: Mapping[str, object], target: Target | None) -> list[ContainerFacts]:
    return [parse_container(a, target or DEFAULT) for a in _inspected(filters, target)]


def project_containers(project: str, target: Target | None = None) -> list[ContainerFacts]:
    return _list({"label": f"com.docker.compose.project={project}"}, target)


def composegen_containers(target: Target | None = None) -> list[ContainerFacts]:
    return _list({"label": "io.composegen.profile"}, target)


def gpu_claims(target: Target | None = None) -> list[dict[str, Any]]:
    """Every running container with what it asks of the GPUs: {"id", "name", "labels",
    "device_requests": [{"driver", "count", "device_ids"}], "env": NVIDIA_VISIBLE_DEVICES or null,
    "runtime"} (campaign exclusive mode)."""
    claims = []
    for a in _inspected({"status": "running"}, target):
        host, config = a.get("HostConfig") or {}, a.get("Config") or {}
        env = [e for e in config.get("Env") or [] if e.startswith("NVIDIA_VISIBLE_DEVICES=")]
        asked = host.get("DeviceRequests") or []
        requests = [
            {
                "driver": d.get("Driver") or "",
                "count": d.get("Count"),
                "device_ids": d.get("DeviceIDs"),
            }
            for d in asked
        ]
        labels = dict(config.get("Labels") or {})
        claims.append(
            {"id": a["Id"], "name": a.get("Name", "").lstrip("/"), "labels": labels}
            | {"device_requests": requests, "env": env[0].split("=", 1)[1] if env else None}
            | {"runtime": host.get("Runtime") or ""}
        )
    return claims


def port_publishers(port: int, target: Target | None = None) -> list[str]:
    """Names of the running containers publishing this host port (a conflict names its holder)."""
    try:
        listed = client(target).api.containers()
    except sdk_module().errors.APIError as exc:
        raise EngineError(f"docker ps on {(target or DEFAULT).label}: {one_line(exc)}") from None
    return sorted(
        (c.get("Names") or ["?"])[0].lstrip("/")
        for c in listed
        if any(p.get("PublicPort") == port for p in c.get("Ports") or [])
    )


def inspect(ctr: ContainerFacts) -> ContainerFacts | None:
    """The container's facts now; None once it is gone."""
    a = unless_gone(
        lambda: client(ctr.target).api.inspect_container(ctr.id), f"docker inspect {ctr.name}"
    )
    return parse_container(a, ctr.target) if a is not None else None


def remove_container(ctr: ContainerFacts, grace: int | None = None) -> None:
    """Remove a container (after a stop of GRACE seconds when given); gone already is fine."""
    sdk = client(ctr.target)
    if grace is not None and ctr.running:
        with contextlib.suppress(sdk_module().errors.APIError):
            sdk.api.stop(ctr.id, timeout=grace)
    _remove_quietly(sdk, ctr.id)


def exec_output(ctr: ContainerFacts, argv: list[str], max_bytes: int = 1 << 20) -> tuple[int, str]:
    """Run ARGV in a running container (the edge's `caddy reload`, its root certificate): exit code
    and output, cut at MAX_BYTES; the engine's API deadline bounds it."""

    def run() -> tuple[int, str]:
        api = client(ctr.target).api
        result = api.exec_create(ctr.id, argv, stdout=True, stderr=True)
        data = api.exec_start(result["Id"])[:max_bytes]
        code = api.exec_inspect(result["Id"]).get("ExitCode")
        return (code if isinstance(code, int) else -1), data.decode("utf-8", "replace")

    answer = unless_gone(run, f"docker exec {ctr.name}")
    if answer is None:
        raise EngineError(f"{ctr.name}: the container is gone")
    return answer


def stop_container(ctr: ContainerFacts, grace: int = 1) -> None:
    """`docker stop -t GRACE`: SIGTERM, then SIGKILL after GRACE seconds (the memory guard's)."""
    unless_gone(
        lambda: client(ctr.target).api.stop(ctr.id, timeout=grace), f"docker stop {ctr.name}"
    )


def put_archive(
    image: str, owner: str, target: Target | None, host_dir: str, tar_stream: Any
) -> None:
    """Unpack a tar stream into HOST_DIR on the engine's host (created when missing) through a
    container that is created, never started, with HOST_DIR bind-mounted: the Docker API's copy, no
    ssh or rsync on the node. The stream goes up in chunks; it is never held whole in memory."""
    docker = sdk_module()
    sdk = client(target)
    where = f"copying into {host_dir} on {(target or DEFAULT).label}"
    binds = {"binds": {host_dir: {"bind": "/composegen-dest", "mode": "rw"}}}
    cid = None
    try:
        cid = _create_probe(sdk, image, ["true"], owner, binds, entrypoint=None)
        if not sdk.api.put_archive(cid, "/composegen-dest", tar_stream):
            raise EngineError(f"{where}: the engine refused the archive")
    except (docker.errors.APIError, docker.errors.ImageNotFound) as exc:
        raise EngineError(f"{where}: {one_line(exc)}") from None
    finally:
        if cid is not None:
            _remove_quietly(sdk, cid)


def edge_proxy_running(network: str, target: Target | None = None) -> bool:
    """A running edge proxy (composegen/edge) is attached to NETWORK."""
    filters = {"network": network, "label": "io.composegen.role=edge-proxy", "status": "running"}
    return bool(client(target).api.containers(filters=filters))


def project_networks(project: str, target: Target | None = None) -> list[NetworkFacts]:
    rows = client(target).api.networks(filters={"label": f"com.docker.compose.project={project}"})
    return [parse_network(n, target or DEFAULT) for n in rows]


def composegen_networks(target: Target | None = None) -> list[NetworkFacts]:
    """Compose networks of every project (a composegen.yaml scope is any prefix: status judges whose),
    with or without containers; not the edge's."""
    rows = client(target).api.networks(filters={"label": "com.docker.compose.project"})
    return [
        parse_network(n, target or DEFAULT)
        for n in rows
        if (n.get("Labels") or {}).get("io.composegen.role") != "edge"
    ]


def remove_network(net: NetworkFacts) -> None:
    unless_gone(
        lambda: client(net.target).api.remove_network(net.id), f"docker network rm {net.name}"
    )
