"""The end of a campaign without --bracket (campaign/resident.py settle): the engine an alias serves
must serve. A wake that fails is tried again, then that stack starts cold; when that fails too the
campaign fails (exit 3) saying so, and the alias keeps its assignment. Against the fake driver."""

from __future__ import annotations

import pytest

from composegen.campaign import resident, runner, state
from composegen.errors import EngineError
from tests.campaign.test_arm_lifecycle import (
    CANDIDATE,
    CONTROL,
    Told,
    _campaign,
    _resident_pair,
    driven,
)


@pytest.fixture
def fake(monkeypatch):
    return driven(monkeypatch)


START = [("up", CONTROL), ("sleep", CONTROL), ("up", CANDIDATE), ("sleep", CANDIDATE)]


def test_a_wake_that_fails_once_is_tried_again(tmp_path, fake, monkeypatch):
    project, directory = _campaign(tmp_path, bracket=False)
    _resident_pair(project, CONTROL, monkeypatch, fake)
    fake.fail[("wake", CONTROL)] = EngineError("POST /wake_up: 500")
    st = runner.run(project, directory, Told())
    assert fake.calls == [*START, ("wake", CONTROL), ("wake", CONTROL)]
    assert fake.stacks == {CONTROL: "ready", CANDIDATE: "asleep"}
    assert st.residency is not None and (st.residency.resident, st.residency.awake) == (
        True,
        CONTROL,
    )


def _wake_never(fake, then_up: EngineError | None = None) -> None:
    """Every wake fails; THEN_UP: the next up (the cold start) fails too."""

    def wake(project, r):
        fake.calls.append(("wake", r.name))
        if then_up is not None:
            fake.fail[("up", r.name)] = then_up
        raise EngineError(f"{r.name}: POST /wake_up: 500")

    fake.wake_stack = wake


def test_a_control_that_will_not_wake_is_started_cold_behind_its_alias(tmp_path, fake, monkeypatch):
    project, directory = _campaign(tmp_path, bracket=False)
    _resident_pair(project, CONTROL, monkeypatch, fake)
    _wake_never(fake)
    st = runner.run(project, directory, Told())
    wakes = [("wake", CONTROL)] * resident.WAKE_TRIES
    assert fake.calls == [*START, *wakes, ("down", CONTROL), ("up", CONTROL)]
    assert fake.stacks == {CONTROL: "ready", CANDIDATE: "asleep"}  # the candidate is not woken
    assert st.residency is not None and st.residency.awake == CONTROL
    assert st.residency.reason == (
        f"waking {CONTROL} at the end failed 2 times ({CONTROL}: POST /wake_up: 500); "
        f"started it cold in 1.5 s, {CANDIDATE} asleep beside it"
    )
    log = (directory / state.LOG).read_text(encoding="utf-8")
    assert f"candidate: waking {CONTROL} at the end failed 2 times" in log, log


def test_when_the_cold_start_fails_too_the_campaign_fails_with_exit_3(tmp_path, fake, monkeypatch):
    project, directory = _campaign(tmp_path, bracket=False)
    _resident_pair(project, CONTROL, monkeypatch, fake)
    _wake_never(fake, then_up=EngineError("preflight failed: gpu"))
    with pytest.raises(EngineError) as caught:
        runner.run(project, directory, Told())
    assert caught.value.exit_code == 3
    assert caught.value.message == (
        f"campaign end: waking {CONTROL} at the end failed 2 times ({CONTROL}: POST /wake_up: 500)"
        f" and starting it cold failed (preflight failed: gpu): the alias that serves it has no "
        f"engine; {CANDIDATE} is asleep"
    )
    st = state.load(directory)
    assert st.residency is not None and not st.residency.resident
    candidate = next(a for a in st.arms if a.key == "candidate")
    assert candidate.status == "failed" and candidate.bundle == "candidate"
    edge = (project.root / "edge.yaml").read_text(encoding="utf-8")
    assert f"aliases: {{ds4-flash: {CONTROL}}}" in edge  # the alias keeps its assignment
