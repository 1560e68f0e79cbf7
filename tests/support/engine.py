"""Helpers for tests on the real engine: small emulated profiles on free ports, and cleanup."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx

from composegen.profiles.caches import VOLUME_PREFIX
from tests.support.cli import run_cli
from tests.support.helpers import make_project
from tests.support.ports import free_port

TINY_HEAD = """\
image: example/vllm@sha256:{digest}
model:
  id: org/tiny-model
  revision: {rev}
  served_name: {served}
service:
  port: {port}
  gpus: {{count: 1}}
  shm_size: 1gb
  stop_grace_period: 5s
  startup_timeout: {timeout}
"""


def tiny_profile(served: str, port: str, *, timeout: int = 120, rest: str = "") -> str:
    """The small profile the engine tests start emulated (its one GPU is removed when emulating);
    `rest` continues the service map and adds the other sections."""
    return (
        TINY_HEAD.format(digest="c" * 64, rev="d" * 40, served=served, port=port, timeout=timeout)
        + rest
    )


_SINGLE_REST = """\
  ulimits: {{memlock: -1, nofile: 1048576}}
vllm:
  max-model-len: 8192
  max-num-batched-tokens: 4096
  max-num-seqs: 1
emulate:
  env:
    EMU_LOAD_SECONDS: "{load}"
{extra_env}"""


def emulated_project(
    tmp: Path, *, load: float = 1.0, timeout: int = 120, env: dict | None = None
) -> tuple[Path, str, int]:
    name = f"t-{uuid.uuid4().hex[:8]}"
    port = free_port()
    extra = "".join(f'    {k}: "{v}"\n' for k, v in (env or {}).items())
    text = tiny_profile(
        f"{name}-served",
        f"{{host: {port}}}",
        timeout=timeout,
        rest=_SINGLE_REST.format(load=load, extra_env=extra),
    )
    root = make_project(tmp, {name: text})
    assert run_cli("--root", str(root), "render", name).returncode == 0
    return root, name, port


@contextlib.contextmanager
def load_held(container: str) -> Iterator[None]:
    """The container's emulator stopped (SIGSTOP) inside the block: its emulated load stands still, so
    checks that must see it loading cannot race the load's end on a busy machine. Docker still runs the
    container and its healthcheck (which finds no port yet: "starting"), its logs so far are readable;
    on leaving it continues (SIGCONT). Not `docker pause`: Docker reports a paused container unhealthy.
    The engine runs on this machine (every engine of this suite does): Docker's pids are ours."""
    init = subprocess.run(
        ["docker", "inspect", "-f", "{{.State.Pid}}", container], capture_output=True, text=True
    )
    top = subprocess.run(
        ["docker", "top", container, "-o", "pid,ppid"], capture_output=True, text=True
    )
    assert init.returncode == 0 and top.returncode == 0, init.stderr + top.stderr
    rows = [line.split() for line in top.stdout.splitlines()[1:]]
    # the emulator under docker-init
    (pid,) = [int(p) for p, ppid in rows if ppid == init.stdout.strip()]
    assert b"composegen.emulator" in Path(f"/proc/{pid}/cmdline").read_bytes(), (
        "the engine is not on this machine"
    )
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def project_leftovers(project: str) -> list[str]:
    names = []
    for kind in ("ps", "network ls"):
        argv = [
            "docker",
            *kind.split(),
            "-a" if kind == "ps" else "-q",
            "--filter",
            f"label=com.docker.compose.project={project}",
            "--format",
            "{{.Names}}" if kind == "ps" else "{{.Name}}",
        ]
        argv = [a for a in argv if a != "-q"]
        res = subprocess.run(argv, capture_output=True, text=True)
        names += [n for n in res.stdout.split() if n]
    return names


def force_remove(project: str) -> None:
    """Remove whatever a test left of PROJECT, its named volumes too. Stopped first (SIGTERM, then 10 s),
    as `down` stops it: an engine on `ipc: host` (the shipped profiles) unlinks its psm_ files from the
    host's /dev/shm only on a clean stop; a bare `rm -f` (SIGKILL) would leave them there for good."""
    label = f"label=com.docker.compose.project={project}"
    subprocess.run(
        f"docker stop -t 10 $(docker ps -q --filter {label}) 2>/dev/null; "
        f"docker rm -f $(docker ps -aq --filter label=com.docker.compose.project={project}) 2>/dev/null; "
        f"docker network rm $(docker network ls -q --filter label=com.docker.compose.project={project}) 2>/dev/null; "
        # the named volumes `down` keeps (r33's jit-cache, container-tmp); not the cache volumes, which
        # stacks of other tests with the same key share
        f"docker volume rm $(docker volume ls -q --filter {label} | grep -v '^{VOLUME_PREFIX}') 2>/dev/null",
        shell=True,
        capture_output=True,
    )


# Held load for `top`: the emulator decodes 3 tokens/s with no per-request cap, so a stream lasts until its
# client lets go (the engine then aborts it at its next token, as vLLM does).
HELD_DECODE = {"EMU_DECODE_TOK_S": "3", "EMU_DECODE_SLEEP_CAP_S": "600"}


def top_under_load(root: Path, name: str, port: int, clients: int) -> subprocess.CompletedProcess:
    """`composegen top NAME --once --json`, sampled while CLIENTS streamed chats are held open against the stack
    at PORT (its served name is NAME-served; the profile's emulate env has HELD_DECODE). `top` runs only once
    the engine's own gauges count all of them, and they are let go only after it sampled: however slow the
    machine, the load is there for the whole sample; and it returns once the engine counts none of them."""
    base = f"http://127.0.0.1:{port}"
    body = {
        "model": f"{name}-served",
        "messages": [{"role": "user", "content": "hello"}],
        "max_tokens": 400,
        # vLLM's extension, honoured by the emulator: all 400 tokens, or the canned six-token reply
        # ends each stream in about 2 s at 3 tok/s and the queue drains during the sample.
        "ignore_eos": True,
    }
    release = threading.Event()

    def hold() -> None:
        # A waiting request gets no byte until it is admitted: on a loaded machine `top` can take longer
        # than a short read timeout, which would drop the waiting ones before the sample.
        held = httpx.Timeout(30, read=600)
        with httpx.stream(
            "POST", f"{base}/v1/chat/completions", json={**body, "stream": True}, timeout=held
        ) as r:
            for _ in r.iter_bytes():
                if release.is_set():
                    break

    def admitted() -> float:
        text = httpx.get(f"{base}/metrics", timeout=10).text
        gauges = ("vllm:num_requests_running", "vllm:num_requests_waiting")
        return sum(
            float(v)
            for g in gauges
            for v in re.findall(rf"^{re.escape(g)}(?:{{[^}}]*}})? (\S+)$", text, re.M)
        )

    threads = [threading.Thread(target=hold) for _ in range(clients)]
    for t in threads:
        t.start()
    try:
        deadline = time.monotonic() + 120
        while admitted() < clients:
            assert time.monotonic() < deadline, f"the engine never counted {clients} requests"
            time.sleep(0.05)
        sample = run_cli("--root", str(root), "top", name, "--once", "--json", "--interval", "1")
    finally:
        release.set()
        for t in threads:
            t.join()
    # The engine counts a dropped stream until its next write fails (every 1/EMU_DECODE_TOK_S s), and admits
    # a waiting one meanwhile: return once its own gauges say the load is gone.
    deadline = time.monotonic() + 60
    while admitted() > 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    return sample
