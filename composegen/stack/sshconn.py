"""ssh:// engines through one long-lived ssh connection per node, as a local unix socket
(docs/multinode.md).

The docker SDK's own ssh support runs a new `ssh … docker system dial-stdio` for every API call,
adds `-p 22` to a URL without a port (so `Port` in ~/.ssh/config is ignored) and reads the pipe
without a deadline. Instead one `ssh -N` per node, for the whole command, forwards a private local
socket to the node's engine socket; every API call and `docker compose` uses it with ordinary
timeouts, and the ssh process is stopped and reaped when the command ends."""

from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from subprocess import DEVNULL, PIPE
from urllib.parse import urlsplit

from composegen.errors import BadInput, EngineError

CONNECT_TIMEOUT_S = 10
DEFAULT_REMOTE_SOCKET = "/var/run/docker.sock"

# ssh's own words -> what to do about it. The first match wins; ssh prints one such line on failure.
FAILURES: tuple[tuple[str, str, str], ...] = (
    ("host key", r"Host key verification failed|REMOTE HOST IDENTIFICATION HAS CHANGED",
     "the node's host key is unknown or changed: connect once with `ssh HOST` to check and accept it "
     "(composegen never answers ssh's prompt)"),
    ("auth", r"Permission denied",
     "ssh refused the key: check IdentityFile/User in ~/.ssh/config and that the key is in the node's "
     "authorized_keys (composegen runs ssh with BatchMode: no password prompt)"),
    ("refused", r"Connection refused",
     "nothing listens on that ssh port: check Port in ~/.ssh/config and that sshd runs on the node"),
    ("timeout", r"timed out|Operation timed out|Connection timed out",
     "the node did not answer in time: check the address and that it is up"),
    ("resolve", r"Could not resolve hostname|Name or service not known",
     "the host name does not resolve: check HostName in ~/.ssh/config"),
)  # fmt: skip


@dataclass(frozen=True)
class SshDestination:
    """What `ssh -G` says the connection will really use (every ~/.ssh/config setting applied)."""

    alias: str
    hostname: str
    user: str
    port: int


def split_url(url: str) -> tuple[str, int | None, str | None]:
    """ssh://[user@]host[:port] -> (host, port or None, user or None); else bad input."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.scheme != "ssh" or not host or host.startswith("-") or parts.path not in ("", "/"):
        raise BadInput(f"{url!r}: expected ssh://[user@]host[:port]")
    try:
        port = parts.port
    except ValueError:
        raise BadInput(f"{url!r}: the port is not a number in 1-65535") from None
    return host, port, parts.username


def _base_argv(url: str) -> list[str]:
    host, port, user = split_url(url)
    argv = ["ssh"]
    config = os.environ.get("COMPOSEGEN_SSH_CONFIG")
    if config:
        argv += ["-F", config]
    if port is not None:  # only when the URL says so: otherwise ~/.ssh/config's Port holds
        argv += ["-p", str(port)]
    if user:
        argv += ["-l", user]
    keepalive = ("ServerAliveInterval=5", "ServerAliveCountMax=3")
    for option in ("BatchMode=yes", f"ConnectTimeout={CONNECT_TIMEOUT_S}", *keepalive):
        argv += ["-o", option]
    return [*argv, "--", host]


def resolve(url: str) -> SshDestination:
    """`ssh -G`: the effective host, user and port of an alias, read as ssh itself reads them."""
    argv = _base_argv(url)
    argv.insert(1, "-G")
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=CONNECT_TIMEOUT_S)
    except FileNotFoundError:
        raise EngineError("ssh:// engines need the `ssh` client (Debian: openssh-client)") from None
    except subprocess.TimeoutExpired:
        raise EngineError(f"ssh -G {url}: no answer within {CONNECT_TIMEOUT_S} s") from None
    if proc.returncode != 0:
        raise EngineError(f"ssh cannot read its configuration for {url}: {_last_line(proc.stderr)}")
    seen = dict(line.split(" ", 1) for line in proc.stdout.splitlines() if " " in line)
    alias, get = split_url(url)[0], seen.get
    return SshDestination(alias, get("hostname", ""), get("user", ""), int(get("port", "22")))


def classify(stderr: str) -> tuple[str, str]:
    """(kind, hint) for ssh's failure output."""
    for kind, pattern, hint in FAILURES:
        if re.search(pattern, stderr):
            return kind, hint
    return "ssh", "run `ssh -v HOST true` to see why the connection fails"


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if not line.startswith("Warning:")]
    lines = [line for line in lines if line]
    return lines[-1] if lines else "(ssh printed nothing)"


class Tunnel:
    """One `ssh -N` forwarding a private local socket to the node's engine. Stopped by close()."""

    def __init__(self, url: str):
        self.url = url
        self.dest = resolve(url)
        # 0700: the socket is only ours
        self._dir = Path(tempfile.mkdtemp(prefix="composegen-ssh-"))
        self.socket = self._dir / "docker.sock"
        self._proc: subprocess.Popen[bytes] | None = None
        self._open()

    def _fail(self, what: str, stderr: str) -> EngineError:
        kind, hint = classify(stderr)
        where = f"{self.dest.user}@{self.dest.hostname}:{self.dest.port}"
        failed = f"failed ({kind}): {_last_line(stderr)}{what}"
        return EngineError(f"ssh to {self.url} ({where}) {failed}", hint=hint)

    def _remote_engine(self) -> str:
        """The node's engine as its ssh session sees it (~/.ssh/environment's DOCKER_HOST)."""
        argv = [*_base_argv(self.url), 'printf %s "${DOCKER_HOST:-}"']
        wait = CONNECT_TIMEOUT_S + 5
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=wait, stdin=DEVNULL)
        except subprocess.TimeoutExpired:
            raise self._fail("", f"Connection timed out after {wait} s") from None
        if proc.returncode != 0:
            raise self._fail("", proc.stderr)
        remote = proc.stdout.strip() or f"unix://{DEFAULT_REMOTE_SOCKET}"
        if remote.startswith("unix://"):
            return remote[len("unix://") :]
        if remote.startswith("tcp://"):
            parts = urlsplit(remote)
            return f"{parts.hostname}:{parts.port or 2375}"
        forwards = "composegen forwards unix:// and tcp://"
        raise EngineError(f"{self.url}: the node's DOCKER_HOST is {remote!r}; {forwards}")

    def _open(self) -> None:
        remote = self._remote_engine()
        argv = [*_base_argv(self.url)]
        forward = ["-o", "ExitOnForwardFailure=yes", "-o", "StreamLocalBindUnlink=yes"]
        argv[1:1] = ["-N", *forward, "-L", f"{self.socket}:{remote}"]
        proc = subprocess.Popen(
            argv, stdin=DEVNULL, stdout=DEVNULL, stderr=PIPE, start_new_session=True
        )
        self._proc, wait = proc, CONNECT_TIMEOUT_S + 5
        deadline = time.monotonic() + wait
        while not self.socket.exists():
            if proc.poll() is not None:
                stderr = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                self._proc = None
                raise self._fail(" while forwarding the engine socket", stderr)
            if time.monotonic() > deadline:
                self.close()
                raise self._fail("", f"Connection timed out: no forwarded socket after {wait} s")
            time.sleep(0.02)

    @property
    def local_url(self) -> str:
        return f"unix://{self.socket}"

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            if proc.stderr:
                proc.stderr.close()
        shutil.rmtree(self._dir, ignore_errors=True)


_tunnels: dict[str, Tunnel] = {}


def local_url(url: str) -> str:
    """The unix:// URL reaching an ssh:// engine (one tunnel per URL); other URLs as given."""
    if not url.startswith("ssh://"):
        return url
    tunnel = _tunnels.get(url)
    if tunnel is None or not tunnel.alive():
        if tunnel is not None:
            tunnel.close()
        tunnel = _tunnels[url] = Tunnel(url)
    return tunnel.local_url


def close_all() -> None:
    while _tunnels:
        _tunnels.popitem()[1].close()


atexit.register(close_all)
