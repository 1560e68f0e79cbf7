"""A second Docker engine on this machine, for multi-node tests: its own dockerd with its own unix socket,
data-root, exec-root, pidfile and default bridge, and no iptables/masquerading, so it coexists with the main
engine. Both engines share the host's network, so an emulated head on one and a worker on the other meet
on 127.0.0.1.

Never `--bridge=none`: a dockerd started with the bridge disabled DELETES the host's `docker0` link (it
cleans up "its" default bridge), which is the main engine's bridge here — every later `docker run` on the
main engine then fails with "could not find bridge docker0". This fixture creates a bridge of its own
(cg-d2-<hex>) and hands it to the second dockerd with `--bridge`, then deletes it.

    from tests.support.second_engine import second_engine  # noqa: F401  (the session fixture)

    def test_x(second_engine): second_engine.url, second_engine.docker("ps", "-a")
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

BASE_IMAGE = os.environ.get("COMPOSEGEN_BASE_IMAGE", "composegen/base:py3")


@dataclass
class SecondEngine:
    root: Path
    proc: subprocess.Popen
    bridge: str

    @property
    def url(self) -> str:
        return f"unix://{self.root / 'docker.sock'}"

    def docker(self, *args: str, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
        res = subprocess.run(
            ["docker", "-H", self.url, *args], capture_output=True, text=True, timeout=120, **kwargs
        )
        if check and res.returncode != 0:
            raise AssertionError(f"docker -H {self.url} {' '.join(args)}: {res.stderr.strip()}")
        return res


def leftovers(project: str, host: str | None = None) -> list[str]:
    """Containers and networks of a compose project on one engine (the default engine when host is None)."""
    base = ["docker", *(["-H", host] if host else [])]
    label = f"label=com.docker.compose.project={project}"
    names = []
    for argv in (
        [*base, "ps", "-a", "--filter", label, "--format", "{{.Names}}"],
        [*base, "network", "ls", "--filter", label, "--format", "{{.Name}}"],
    ):
        res = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr
        names += res.stdout.split()
    return names


def force_remove(project: str, host: str | None = None) -> None:
    base = ["docker", *(["-H", host] if host else [])]
    label = f"label=com.docker.compose.project={project}"
    ids = subprocess.run(
        [*base, "ps", "-aq", "--filter", label], capture_output=True, text=True
    ).stdout.split()
    if ids:
        subprocess.run([*base, "rm", "-f", *ids], capture_output=True)
    nets = subprocess.run(
        [*base, "network", "ls", "-q", "--filter", label], capture_output=True, text=True
    ).stdout.split()
    if nets:
        subprocess.run([*base, "network", "rm", *nets], capture_output=True)


def _unavailable(reason: str):
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and a second dockerd cannot run here: {reason}")
    pytest.skip(f"a second dockerd cannot run here: {reason}")


def _start(root: Path, bridge: str) -> subprocess.Popen:
    for sub in ("data", "exec"):
        (root / sub).mkdir()
    made = subprocess.run(
        ["ip", "link", "add", "name", bridge, "type", "bridge"], capture_output=True, text=True
    )
    if made.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        _unavailable(f"cannot create the bridge {bridge}: {made.stderr.strip()}")
    with open(root / "dockerd.log", "wb") as log:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(
            [
                "dockerd",
                "--host",
                f"unix://{root / 'docker.sock'}",
                "--data-root",
                str(root / "data"),
                "--exec-root",
                str(root / "exec"),
                "--pidfile",
                str(root / "docker.pid"),
                f"--bridge={bridge}",
                "--iptables=false",
                "--ip6tables=false",
                "--ip-masq=false",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _stop(engine: SecondEngine) -> None:
    ids = engine.docker("ps", "-aq", check=False).stdout.split()
    if ids:
        engine.docker("rm", "-f", *ids, check=False)
    if engine.proc.poll() is None:
        engine.proc.send_signal(signal.SIGTERM)  # the dockerd this fixture started, by its own pid
        try:
            engine.proc.wait(60)
        except subprocess.TimeoutExpired:
            engine.proc.kill()
            engine.proc.wait(10)
    # dockerd leaves its netns (and any overlay) mounts under exec-root/data-root: unmount before removing.
    mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    for point in sorted(
        (m for m in mounts if m.startswith(str(engine.root) + "/")), key=len, reverse=True
    ):
        subprocess.run(["umount", "-l", point], capture_output=True)
    shutil.rmtree(engine.root, ignore_errors=True)
    subprocess.run(["ip", "link", "del", engine.bridge], capture_output=True)


def _running_engine(load_base: bool):
    if os.geteuid() != 0 or shutil.which("dockerd") is None or shutil.which("ip") is None:
        _unavailable("needs root, dockerd and ip(8)")
    # A short path: containerd's socket lives under exec-root and unix socket paths are limited to 108 bytes.
    root = Path(tempfile.mkdtemp(prefix="cg-d2-", dir="/tmp"))
    bridge = f"cg-d2-{uuid.uuid4().hex[:8]}"  # 14 characters: link names stop at 15
    had_docker0 = Path("/sys/class/net/docker0").exists()
    engine = SecondEngine(root, _start(root, bridge), bridge)
    try:
        deadline = time.monotonic() + 60
        while engine.docker("info", "--format", "{{.ServerVersion}}", check=False).returncode != 0:
            if engine.proc.poll() is not None or time.monotonic() > deadline:
                log = (root / "dockerd.log").read_text(errors="replace")[-1500:]
                _stop(engine)
                _unavailable(f"dockerd did not come up:\n{log}")
            time.sleep(0.3)
        if load_base:
            save = subprocess.Popen(["docker", "save", BASE_IMAGE], stdout=subprocess.PIPE)
            loaded = subprocess.run(
                ["docker", "-H", engine.url, "load"],
                stdin=save.stdout,
                capture_output=True,
                text=True,
                timeout=300,
            )
            save.stdout.close()
            assert save.wait(60) == 0 and loaded.returncode == 0, (
                f"loading {BASE_IMAGE}: {loaded.stderr}"
            )
        yield engine
    finally:
        _stop(engine)
    assert not had_docker0 or Path("/sys/class/net/docker0").exists(), (
        "the second dockerd removed the main engine's docker0"
    )


@pytest.fixture(scope="session")
def second_engine():
    """A second engine holding the base image (loaded from the main engine)."""
    yield from _running_engine(load_base=True)


@pytest.fixture(scope="session")
def bare_second_engine():
    """A second engine with no image at all: what a fresh machine's engine holds."""
    yield from _running_engine(load_base=False)
