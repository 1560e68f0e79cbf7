"""The evidence tests' emulated stack on the real engine: one tiny profile brought up by `up
--emulate` in its own project (its compose project and a free port), paced like a small server:
20,000 tokens/s of prefill, then 100 tokens/s of decode per request."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.emulator_proc import free_port
from tests.support.engine import force_remove, tiny_profile
from tests.support.helpers import make_project

PACED = """\
vllm:
  max-model-len: 8192
  max-num-batched-tokens: 4096
  max-num-seqs: {seqs}
emulate:
  env:
    EMU_LOAD_SECONDS: "0.5"
    EMU_PREFILL_TOK_S: "20000"
    EMU_DECODE_TOK_S: "100"
"""


@dataclass(frozen=True)
class PacedStack:
    name: str
    root: Path

    def cli(self, *args: str) -> subprocess.CompletedProcess:
        return run_cli("--root", str(self.root), *args, timeout=600)


@pytest.fixture
def paced_stack(tmp_path) -> Iterator[Callable[..., PacedStack]]:
    """`paced_stack(prefix, max_num_seqs, sections="")`: the stack, rendered and up; `sections`
    adds top-level profile sections (qualify: …). Down and its containers removed after the test,
    whatever happened."""
    made: list[PacedStack] = []

    def up(prefix: str, max_num_seqs: int, sections: str = "") -> PacedStack:
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        rest = PACED.format(seqs=max_num_seqs) + sections
        port = f"{{host: {free_port()}}}"
        root = make_project(tmp_path, {name: tiny_profile(f"{name}-served", port, rest=rest)})
        stack = PacedStack(name, root)
        made.append(stack)
        assert stack.cli("render", name).returncode == 0
        started = stack.cli("up", name, "--emulate")
        assert started.returncode == 0, started.stderr
        return stack

    yield up
    for stack in made:
        stack.cli("down", stack.name)
        force_remove(f"composegen-{stack.name}")
