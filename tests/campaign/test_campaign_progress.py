"""A campaign's progress tells the truth, on the real engine with the emulated vLLM: each arm is
labelled (`arm 2/3: candidate NAME`) and drawn from its own engine's start — never the previous
arm's "✓ ready" or stages —, the evidence steps appear as they run, each arm ends in the summary
`up` prints, and the end is the Outcome, the `decide` command and the record's path, not the whole
record (whose SHA-256 table wraps at 80 columns). In a real 80x24 terminal (tmux), and piped."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.support.campaigns import emulated_ab
from tests.support.engine import force_remove
from tests.support.helpers import REPO, run_cli
from tests.support.terminal import Terminal

pytestmark = pytest.mark.docker

SHA256 = re.compile(r"\b[0-9a-f]{64}\b")


def _argv(root, control: str, candidate: str) -> list[str]:
    return [sys.executable, "-m", "composegen", "--root", str(root), "campaign", "run", control,
            candidate, "--bracket", "--gate", "--tools", "2", "--ladder", "2000", "--emulate",
            "--name", "ab"]  # fmt: skip


def _the_end_is_short(lines: list[str]) -> None:
    start = next(i for i, line in enumerate(lines) if line == "campaign ab: Outcome")
    end = lines[start:]
    assert any(line.startswith("decide: composegen campaign decide ab --promote") for line in end)
    assert any(line.startswith("record: runs/campaigns/ab/campaign.md") for line in end)
    assert len(end) <= 20, end  # one 80x24 screen, not campaign.md (its tables and hashes)
    assert not any(SHA256.search(line) or line.startswith("|") for line in lines), lines


def test_a_campaign_in_an_80x24_terminal_shows_each_arms_own_start(tmp_path):
    root, control, candidate = emulated_ab(tmp_path, candidate_load=3.0)
    assert run_cli("--root", str(root), "render").returncode == 0
    term = Terminal(tmp_path, width=80, height=24)
    try:
        code = term.run(_argv(root, control, candidate), cwd=tmp_path, timeout=300)
        assert code == 0, "\n".join(term.screen())
        drawn, screen = term.drawn(), term.screen(joined=True)
        labels = [f"arm 1/3: control {control}", f"arm 2/3: candidate {candidate}",
                  f"arm 3/3: bracket {control}"]  # fmt: skip
        at = [drawn.index(label) for label in labels]
        assert at == sorted(at)
        for start, label, name in zip(at, labels, (control, candidate, control), strict=True):
            arm = drawn[start : drawn.index(f"{name} is ready at", start)]
            # the first frame of each arm is its own engine's: a stage of its load, not "✓ ready"
            first_stage = arm.find("▸ ")
            assert first_stage != -1, (label, arm)
            ready = arm.find("✓ ready in")
            assert ready == -1 or ready > first_stage, (label, arm[: ready + 80])
        after = drawn[at[1] :]
        assert "arm 2/3: candidate" in after and "· gates 1/7: smoke" in after
        assert "· ladder target 1/1: 2,000 tokens" in after
        assert drawn.count("time to ready") >= 3  # the summary `up` prints, for every arm
        assert all(len(line) <= 80 for line in screen), [line for line in screen if len(line) > 80]
        _the_end_is_short(term.screen())
    finally:
        term.close()
        for name in (control, candidate):
            force_remove(f"composegen-{name}")


def test_a_piped_campaign_labels_every_line_and_its_heartbeats_name_the_arms_stage(tmp_path):
    root, control, candidate = emulated_ab(tmp_path, candidate_load=4.0)
    assert run_cli("--root", str(root), "render").returncode == 0
    try:
        proc = subprocess.run(
            _argv(root, control, candidate),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "COMPOSEGEN_HEARTBEAT_S": "0.3"},
        )
        assert proc.returncode == 0, proc.stderr
        err = proc.stderr.splitlines()
        label = f"arm 2/3: candidate {candidate} · "
        mine = [line[len(label) :] for line in err if line.startswith(label)]
        ready_at = next(i for i, line in enumerate(err) if line.startswith(f"{candidate} is ready"))
        before = [line for line in err[:ready_at] if line.startswith(label)]
        beats = [line[len(label) :] for line in before if "] … " in line]
        assert beats, mine  # the heartbeats of the candidate's load
        # each names the stage of the candidate's own load, never the control's "ready"
        assert not any(re.search(r"\] … ready\b", b) for b in beats), beats
        assert all(not b.split("] … ", 1)[1].startswith("ready") for b in beats), beats
        assert "gates 1/7: smoke" in mine and "ladder target 1/1: 2,000 tokens" in mine
        _the_end_is_short(proc.stdout.splitlines())
    finally:
        for name in (control, candidate):
            force_remove(f"composegen-{name}")
