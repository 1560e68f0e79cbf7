"""A campaign that sleeps the stack an alias serves (the control, through the candidate's arm) goes
through the switch's lock and journal: the alias marked before the engine sleeps, the journal held
while it sleeps (a promote, qualify or wake meanwhile is refused), and a Ctrl-C leaves both for
`campaign resume` (or `edge recover`). Against the fake driver of test_arm_lifecycle.py."""

from __future__ import annotations

import pytest

from composegen.campaign import runner
from composegen.edge import journal, undo
from composegen.errors import CheckFailed, Interrupted
from composegen.evidence import capture
from tests.campaign.test_arm_lifecycle import (
    CANDIDATE,
    CONTROL,
    Told,
    _campaign,
    _resident_pair,
    driven,
    told_at,
)

ASLEEP = f"ds4-flash's engine {CONTROL} is asleep since"


@pytest.fixture
def fake(monkeypatch):
    return driven(monkeypatch)


def test_the_alias_s_engine_sleeps_marked_and_held_through_the_candidate_s_arm(
    tmp_path, fake, monkeypatch
):
    project, directory = _campaign(tmp_path, bracket=False)
    _resident_pair(project, CONTROL, monkeypatch, fake)
    during, evidence = [], capture.capture_stack

    def candidate_evidence(project_, r, **options):
        if r.name == CANDIDATE:
            during.append(told_at(project))
            with pytest.raises(CheckFailed, match=f"campaign .* keeps {CONTROL} asleep"):
                undo.refuse_interrupted(project)  # what promote, qualify and wake ask first
        return evidence(project_, r, **options)

    monkeypatch.setattr(capture, "capture_stack", candidate_evidence)
    runner.run(project, directory, Told())
    stage, held = fake.seen_at_sleep[0]  # as the control went to sleep
    assert stage is not None and stage.startswith(ASLEEP) and held == f"campaign {CONTROL}"
    stage, held = during[0]
    assert stage is not None and stage.startswith(ASLEEP) and held == f"campaign {CONTROL}"
    assert fake.stacks == {CONTROL: "ready", CANDIDATE: "asleep"}
    assert told_at(project) == (None, None)  # woken at the end: no mark, no journal


def test_ctrl_c_in_the_candidate_s_arm_leaves_the_mark_and_journal_that_resume_ends(
    tmp_path, fake, monkeypatch
):
    project, directory = _campaign(tmp_path)
    _resident_pair(project, CONTROL, monkeypatch, fake)
    fake.fail[("up", CANDIDATE)] = KeyboardInterrupt()
    with pytest.raises(Interrupted):
        runner.run(project, directory, Told())
    stage, held = told_at(project)
    assert stage is not None and stage.startswith(ASLEEP) and held == f"campaign {CONTROL}"
    assert fake.stacks[CONTROL] == "asleep"
    entry = journal.read(project)
    assert entry is not None and entry["target_was"] == "awake"  # edge recover wakes it

    runner.run(project, directory, Told())  # `campaign resume`: the bracket wakes it
    assert ("wake", CONTROL) in fake.calls and told_at(project) == (None, None)
