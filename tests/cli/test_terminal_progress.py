"""`up --emulate` in a real 80x24 terminal (tmux): one progress block redrawn in place, no line the
terminal had to wrap, every stage of the emulated load drawn; and the same start without a terminal."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from composegen.vllm import stages
from tests.support.engine import emulated_project
from tests.support.terminal import Terminal

pytestmark = pytest.mark.docker

# what the emulator's staged load goes through
LOAD_STAGES = ["weights", "compile", "kv_cache", "graphs"]


def _cli(root, *argv: str) -> list[str]:
    return [sys.executable, "-m", "composegen", "--root", str(root), *argv]


def _down(root, name: str) -> None:
    subprocess.run(_cli(root, "down", name), capture_output=True, timeout=120)


@pytest.mark.parametrize("width", [80, 40])
def test_up_in_a_terminal_draws_one_block_that_never_wraps_and_shows_every_stage(tmp_path, width):
    root, name, _ = emulated_project(tmp_path, load=3.0, env={"EMU_WEIGHT_SHARDS": "4"})
    term = Terminal(tmp_path, width=width, height=24)
    try:
        assert term.run(_cli(root, "up", name, "--emulate"), cwd=tmp_path) == 0, "\n".join(
            term.screen()
        )
        screen, joined = term.screen(), term.screen(joined=True)
        block = [
            line for line in joined[: next(i for i, x in enumerate(joined) if "is ready at" in x)]
        ]
        assert all(len(line) <= width for line in block), [
            line for line in block if len(line) > width
        ]
        # redrawn in place: one block
        assert sum(line.startswith("  elapsed ") for line in screen) == 1
        assert any(line.startswith("✓ ready in ") for line in screen)
        top = next(i for i, line in enumerate(screen) if line.startswith("✓ ready in "))
        done = [line for line in screen[top + 2 : top + 4] if line.startswith(("  ✓ ", "    "))]
        # folded whole, or counted: never cut
        assert done and not any("…" in line for line in done), done
        shown = " · ".join(line[4:] for line in done)
        assert all(stages.STAGES[key] in shown for key in LOAD_STAGES[1:]) or "earlier" in shown, (
            done
        )
        drawn = term.drawn()
        for key in LOAD_STAGES:
            assert f"▸ {stages.STAGES[key]}" in drawn, f"stage {key!r} was never drawn"
        assert re.search(r"\d/4 shards", drawn) and re.search(r"\d+/(67|35) graphs", drawn)
    finally:
        term.close()
        _down(root, name)


def test_up_without_a_terminal_prints_one_line_per_stage_and_heartbeats(tmp_path):
    root, name, _ = emulated_project(tmp_path, load=3.0, env={"EMU_WEIGHT_SHARDS": "4"})
    try:
        env = {**os.environ, "COMPOSEGEN_HEARTBEAT_S": "0.5"}
        proc = subprocess.run(
            _cli(root, "up", name, "--emulate"),
            capture_output=True,
            text=True,
            timeout=180,
            env=env,
        )
        assert proc.returncode == 0, proc.stderr
        said = [line.split("] ", 1)[1] for line in proc.stderr.splitlines() if line.startswith("[")]
        stage_lines = [s for s in said if not s.startswith("… ")]
        # vLLM compiles inside its profiling run: profiling, torch.compile, profiling again
        keys = [
            "create",
            "imports",
            "download",
            "weights",
            "kv_cache",
            "compile",
            "kv_cache",
            "graphs",
            "warmup",
        ]
        keys += ["api", "ready"]
        assert stage_lines == [stages.STAGES[k] for k in keys]
        # heartbeats
        assert any(s.startswith("… ") and "left of startup_timeout" in s for s in said)
        assert "\x1b[" not in proc.stderr  # no terminal: no escape sequences
    finally:
        _down(root, name)
