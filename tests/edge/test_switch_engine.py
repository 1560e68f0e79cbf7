"""promote and rollback on the real engine (one stack at a time), with a client polling the alias through
the real Caddy throughout: it sees the old model, then 503 + Retry-After + the load stage, then the new
model — never an error without Retry-After, never a model the alias does not point at."""

from __future__ import annotations

import hashlib
import json
import re
import sys
import time

import pytest

from composegen.project import Project
from composegen.vllm.stages import STAGES
from tests.support.edge import (
    EdgeProject,
    Poller,
    edge_project,
    phases,
    sealed_decision,
    serving,
)
from tests.support.terminal import Terminal

pytestmark = pytest.mark.docker
# the switch's own steps, and the load stages of `up`'s stage detection
STAGE_WORDS = ("stopping", "preflight", "starting", "created", "gates on", *STAGES.values())


def decide(edge: EdgeProject, campaign: str, profile: str, decision: str = "promote") -> bytes:
    """What `campaign decide` leaves, without running the campaign: the campaign's record naming the arm's
    profile hash, and decision.json naming that record's hash, sealed with the project's key."""
    return sealed_decision(Project(edge.root), campaign, profile, decision)


@pytest.fixture
def edge(tmp_path, edge_img):
    with serving(edge_project(tmp_path, edge_img, load=4)) as project:
        yield project


def test_promote_then_rollback_while_a_client_polls_the_alias(edge):
    old_model, new_model = f"{edge.old}-served", f"{edge.new}-served"
    decision = decide(edge, "c1", edge.new)
    poller = Poller(edge, edge.ok("edge", "keys", "add", "poller").strip())
    edge.ca_file()
    poller.start()
    try:
        poller.wait_for(5)  # the old model answers before the switch begins
        promoted = json.loads(
            edge.ok(
                "promote",
                edge.new,
                "--alias",
                "ds4-flash",
                "--campaign",
                "c1",
                "--emulate",
                "--json",
            )
        )
        poller.wait_for(len(poller.seen) + 5)
        back, drawn, screen, ticked = _rollback_at_a_terminal(edge)
        poller.wait_for(len(poller.seen) + 2)
    finally:
        poller.stop.set()
        poller.join(60)
    # while it ran: `up`'s block (its stage and bar) with what the clients were told; then the summary
    assert "▸ loading weights" in drawn and "━" in drawn, drawn[-3000:]
    assert "ds4-flash answers 503 + Retry-After: loading weights" in drawn, drawn[-3000:]
    assert f"  ✓ stopping {edge.new} " in drawn and "  elapsed 0:0" in drawn, drawn[-3000:]
    # a step that prints nothing (the gates) still advances the clock: two screens 3 s apart
    assert ticked[1] - ticked[0] >= 2, ticked
    assert not any("answers 503" in line for line in screen), screen  # the block went
    assert not any("evidence" in line for line in screen), screen  # edge.yaml's assignment had none
    seen = poller.seen
    bad = [
        s
        for s in seen
        if not ((s[0] == 200 and s[2] in (old_model, new_model)) or (s[0] == 503 and s[1]))
    ]
    assert not bad, f"answers that are neither a model nor 503 + Retry-After: {bad[:5]}"
    assert phases(seen) == [old_model, "503", new_model, "503", old_model], phases(seen)
    stages = [s[2] for s in seen if s[0] == 503]
    assert all(any(w in stage for w in STAGE_WORDS) for stage in stages), set(stages)
    assert any("loading weights" in stage for stage in stages)  # the same stage detection `up` uses
    assert promoted["previous"] == edge.old and promoted["profile"] == edge.new
    assert promoted["evidence"]["sha256"] == hashlib.sha256(decision).hexdigest()
    assert back.startswith(f"ds4-flash: {edge.new} → {edge.old} (rollback, "), back
    history = json.loads((edge.root / ".composegen/edge/assignments.json").read_text())["aliases"][
        "ds4-flash"
    ]
    assert [h["profile"] for h in history] == [edge.old, edge.new, edge.old]
    assert history[1]["evidence"]["kind"] == "campaign"


def _rollback_at_a_terminal(edge: EdgeProject) -> tuple[str, str, list[str], list[int]]:
    """`rollback` in a real terminal (tmux, 80x24): its summary's first line, all it drew, the screen,
    and the block's elapsed seconds on two screens 3 s apart while its gates run, silent (the old
    stack comes back with a slow prefill: the smoke gate's 19 prompt tokens take 6 s)."""
    old = edge.root / "profiles" / f"{edge.old}.yaml"
    old.write_text(
        old.read_text() + '    EMU_PREFILL_TOK_S: "3"\n    EMU_PREFILL_SLEEP_CAP_S: "8"\n'
    )
    term = Terminal(edge.root, width=80, height=24)
    argv = [sys.executable, "-m", "composegen", "rollback", "ds4-flash", "--emulate"]
    try:
        term.start(argv, edge.root)
        term.wait_for(f"Retry-After: gates on {edge.old}", timeout=300)
        first = _elapsed(term.screen())
        time.sleep(3.0)
        ticked = [first, _elapsed(term.screen())]
        assert term.wait_exit(300) == 0, term.screen()
        drawn, screen = term.drawn(), term.screen(joined=True)
    finally:
        term.close()
    return next(line for line in screen if line.startswith("ds4-flash: ")), drawn, screen, ticked


def _elapsed(screen: list[str]) -> int:
    """The seconds of the block's `elapsed M:SS` while it shows the gates (what the clients are told)."""
    lines = [line for line in screen if "answers 503 + Retry-After: gates on" in line]
    assert lines, screen  # the gates still run
    minutes, seconds = re.search(r"elapsed (\d+):(\d\d)", lines[-1]).groups()
    return int(minutes) * 60 + int(seconds)


def test_a_refused_decision_changes_nothing(edge):
    started = edge.container_started(edge.old)
    decide(edge, "c2", edge.new, decision="no-promotion")
    res = edge.cli("promote", edge.new, "--alias", "ds4-flash", "--campaign", "c2", "--emulate")
    assert res.returncode == 1 and "decided 'no-promotion', not promote" in res.stderr
    res = edge.cli("promote", edge.new, "--alias", "ds4-flash", "--emulate")
    assert res.returncode == 1 and "no qualify run to promote on" in res.stderr
    assert edge.container_started(edge.old) == started


def test_a_failed_switch_rolls_back_by_itself_and_says_so(tmp_path, edge_img):
    edge = edge_project(tmp_path, edge_img, load=2, new_env={"EMU_FAULT": "crash_during_load"})
    try:
        edge.ok("edge", "up")
        edge.ok("up", edge.old, "--emulate")
        decide(edge, "c3", edge.new)
        key = edge.ok("edge", "keys", "add", "watcher").strip()
        res = edge.cli("promote", edge.new, "--alias", "ds4-flash", "--campaign", "c3", "--emulate")
        assert res.returncode == 1, res.stderr
        assert f"rolled back: ds4-flash points at {edge.old} again" in res.stderr
        body = {
            "model": "ds4-flash",
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 2,
        }
        status, _, data = edge.request("POST", "/v1/chat/completions", key, body)
        assert status == 200 and json.loads(data)["model"] == f"{edge.old}-served"
        assert "assignments.json" not in {
            p.name for p in (edge.root / ".composegen/edge").iterdir()
        }
    finally:
        edge.cleanup()
