"""Small helpers for tests: temporary projects and running the CLI in a subprocess (only where a process
boundary is under test; tests/support/cli.run_cli runs it in the test's own process, same arguments)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

MINIMAL = """\
image: example/vllm@sha256:{digest}
model:
  id: org/model
  revision: {rev}
  served_name: tiny
service:
  port: {{host: 39999}}
  gpus: {{count: 1}}
  shm_size: 4gb
vllm:
  max-model-len: 4096
  max-num-batched-tokens: 2048
  max-num-seqs: 4
""".format(digest="a" * 64, rev="b" * 40)


def make_project(tmp: Path, profiles: dict[str, str], copy_shipped: bool = False) -> Path:
    (tmp / "profiles").mkdir(parents=True, exist_ok=True)
    if copy_shipped:
        for p in (REPO / "profiles").glob("*.yaml"):
            shutil.copy(p, tmp / "profiles" / p.name)
    for name, text in profiles.items():
        (tmp / "profiles" / f"{name}.yaml").write_text(textwrap.dedent(text), encoding="utf-8")
    return tmp


def run_cli(
    *args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "NO_COLOR": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "composegen", *args],
        cwd=cwd or REPO,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
