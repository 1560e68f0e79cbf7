"""The suite's own cleanup on the real engine: `force_remove` stops an `ipc: host` engine with SIGTERM
before removing it, so the psm_ files it made in the host's /dev/shm go with it (a SIGKILL leaves them
there for good, as with vLLM: tests/emulator/test_server_lifecycle.py)."""

from __future__ import annotations

import os
import uuid

import pytest

from composegen.shm import scan
from composegen.stack import engine
from tests.support.cli import run_cli
from tests.support.engine import force_remove
from tests.support.helpers import make_project
from tests.support.ports import free_port

pytestmark = pytest.mark.docker

HOST_IPC = """\
image: example/vllm@sha256:{digest}
model:
  id: org/tiny-model
  revision: {rev}
  served_name: {name}-served
service:
  port: {{host: {port}}}
  gpus: {{count: 2}}
  ipc: host
  stop_grace_period: 10s
  startup_timeout: 120
vllm:
  max-model-len: 8192
  max-num-batched-tokens: 4096
  max-num-seqs: 1
  tensor-parallel-size: 2
emulate:
  env:
    EMU_LOAD_SECONDS: "0.5"
"""


def _held_by(project: str) -> list[str]:
    report = scan.scan("/dev/shm", container_labels=engine.label_lookup())
    return sorted(
        e.name for e in report.entries if any(h.compose_project == project for h in e.holders)
    )


def test_force_remove_takes_an_ipc_host_engines_shm_files_with_it(tmp_path):
    name = f"t-{uuid.uuid4().hex[:8]}"
    text = HOST_IPC.format(digest="c" * 64, rev="d" * 40, name=name, port=free_port())
    root = make_project(tmp_path, {name: text})
    project = f"composegen-{name}"
    held: list[str] = []
    assert run_cli("--root", str(root), "render", name).returncode == 0
    try:
        up = run_cli("--root", str(root), "up", name, "--emulate", timeout=300)
        assert up.returncode == 0, up.stderr
        held = _held_by(project)
        # TP 2: one broadcast queue and a response queue per worker, in the host's /dev/shm
        assert len(held) == 3 and all(n.startswith("psm_") for n in held), held
        force_remove(project)
        assert [n for n in held if os.path.exists(f"/dev/shm/{n}")] == []
    finally:
        force_remove(project)
        for n in held:  # ours by their holders' label: never left behind, even when this fails
            if os.path.exists(f"/dev/shm/{n}"):
                os.unlink(f"/dev/shm/{n}")
