"""An overall estimate at 80x24 (tmux): with an earlier start of the same profile in runs/ (a real vLLM
startup log: 189 s from its first stamped line to ready), `up` shows "ready in ≈ 3 min (estimate, a cold
start)" next to the stage ETA; a profile with no earlier start shows none."""

from __future__ import annotations

import sys

import pytest

from composegen.evidence import bundle
from composegen.evidence.estimate import earlier_load, load_seconds
from composegen.profiles import resolve as profiles
from composegen.project import Project
from composegen.vllm import startup
from tests.support.cli import run_cli
from tests.support.engine import emulated_project, force_remove
from tests.support.helpers import REPO
from tests.support.terminal import Terminal

LOG = REPO / "tests/data/logs/vllm-0.33.0-r33-4096-arm.log"


def test_the_load_time_of_a_recorded_start_is_read_from_its_stamps():
    assert load_seconds(LOG.read_text()) == 189.0  # 10:02:14 .. 10:05:23, the seed's arm
    # never got ready
    assert load_seconds("(APIServer pid=1) INFO 11-20 10:02:14 [a.py:1] x\n") is None


@pytest.mark.docker
def test_up_shows_ready_in_about_n_min_from_an_earlier_start(tmp_path):
    root, name, _ = emulated_project(tmp_path, load=4.0, env={"EMU_WEIGHT_SHARDS": "4"})
    project = Project(root)
    assert earlier_load(root, name) is None
    r = profiles.load(project, name)
    text = LOG.read_text()
    bundle.write_run(
        project, r, startup_log_text=text, startup_report=startup.parse_startup_log(text)
    )
    assert earlier_load(root, name) == 189.0
    term = Terminal(tmp_path, width=80, height=24)
    try:
        argv = [sys.executable, "-m", "composegen", "--root", str(root), "up", name, "--emulate"]
        assert term.run(argv, cwd=tmp_path, timeout=300) == 0, "\n".join(term.screen())
        drawn = term.drawn()
        # the recorded start was not a warm one, and no start filled this profile's cache yet
        assert "ready in ≈ 3 min (estimate, a cold start)" in drawn, drawn[-2000:]
        assert all(len(line) <= 80 for line in term.screen(joined=True))
    finally:
        term.close()
        run_cli("--root", str(root), "down", name)
        force_remove(f"composegen-{name}")
