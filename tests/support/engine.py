"""Helpers for tests on the real engine: small emulated profiles on free ports, and cleanup."""

from __future__ import annotations

import socket
import subprocess
import threading
import uuid
from pathlib import Path

import httpx

from tests.support.helpers import make_project, run_cli

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
    return TINY_HEAD.format(digest="c" * 64, rev="d" * 40, served=served, port=port, timeout=timeout) + rest


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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def emulated_project(
    tmp: Path, *, load: float = 1.0, timeout: int = 120, env: dict | None = None
) -> tuple[Path, str, int]:
    name = f"t-{uuid.uuid4().hex[:8]}"
    port = free_port()
    extra = "".join(f'    {k}: "{v}"\n' for k, v in (env or {}).items())
    text = tiny_profile(
        f"{name}-served", f"{{host: {port}}}", timeout=timeout, rest=_SINGLE_REST.format(load=load, extra_env=extra)
    )
    root = make_project(tmp, {name: text})
    assert run_cli("--root", str(root), "render", name).returncode == 0
    return root, name, port


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
    subprocess.run(
        f"docker rm -f $(docker ps -aq --filter label=com.docker.compose.project={project}) 2>/dev/null; "
        f"docker network rm $(docker network ls -q --filter label=com.docker.compose.project={project}) 2>/dev/null",
        shell=True,
        capture_output=True,
    )


def top_under_load(root: Path, name: str, port: int, clients: int) -> subprocess.CompletedProcess:
    """`composegen top NAME --once --json`, sampled while CLIENTS chat requests run against the stack at PORT
    (its served name is NAME-served; the test profiles decode slowly, so the requests outlast the sample)."""
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    body = {"model": f"{name}-served", "messages": [{"role": "user", "content": "hello there"}], "max_tokens": 12}
    threads = [
        threading.Thread(target=httpx.post, args=(url,), kwargs={"json": body, "timeout": 60}) for _ in range(clients)
    ]
    for t in threads:
        t.start()
    res = run_cli("--root", str(root), "top", name, "--once", "--json", "--interval", "1")
    for t in threads:
        t.join()
    return res
