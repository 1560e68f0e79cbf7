"""`qualify NAME --alias ALIAS` (edge/proofarm.py, proofsteps.py) and `edge recover` on a fake engine
(tests/edge/fakearm.py): the restore brings the serving stack back as it ran (a real one real under
`--emulate`), a failure anywhere between the first mark and the move restores, a failed restore keeps
the verdict (exit 3), signals keep their exit codes, and recovery leaves the target as it was found."""

from __future__ import annotations

import json

import pytest

from composegen.edge import journal, proofarm, recovery, routes
from composegen.errors import BadInput, CheckFailed, EngineError, Interrupted, WriteFailed
from tests.edge.fakearm import NEW, OLD, Engine, example

ALIAS = "ds4-flash"
BACK_AWAKE = [f"wake {OLD}", f"warm-up {OLD}", f"identity {OLD}", f"gates {OLD}"]


def marks(project) -> dict:
    """The 503 marks routes.json holds now ({} when the alias serves)."""
    doc = json.loads(routes.routes_path(project).read_text())
    return {a: r["switch"] for a, r in doc["aliases"].items() if r.get("switch")}


@pytest.mark.parametrize("old_emulated", [False, True])
def test_the_cold_restore_brings_the_serving_stack_back_as_it_ran(
    tmp_path, monkeypatch, old_emulated
):
    project, edge = example(tmp_path)
    engine = Engine({OLD: ("awake", old_emulated), NEW: ("down", False)})
    engine.install(monkeypatch)
    kept: list = []
    engine.hooks[f"qualify {NEW}"] = lambda: kept.append(journal.read(project))
    report = proofarm.prove(project, edge, NEW, ALIAS, emulate=not old_emulated)
    back = f"up {OLD}{' emulated' if old_emulated else ''}"
    assert engine.calls == [f"down {OLD}", f"up {NEW}{'' if old_emulated else ' emulated'}",
                            f"qualify {NEW}", f"down {NEW}", back, f"gates {OLD}"]  # fmt: skip
    assert engine.state[OLD] == ("awake", old_emulated) and report.restore_failed is None
    assert (kept[0]["source_emulated"], kept[0]["target_was"]) == (old_emulated, "down")
    assert journal.read(project) is None and marks(project) == {}


@pytest.mark.parametrize(
    ("where", "exc"),
    [
        (f"proof {NEW}", BadInput("runs/q1: no qualify.json")),
        (f"qualify {NEW}", RuntimeError("a bug")),
        (f"up {NEW} emulated", TimeoutError("no answer")),
    ],
)
def test_any_failure_before_the_move_restores_and_ends_the_journal(
    tmp_path, monkeypatch, where, exc
):
    project, edge = example(tmp_path)
    engine = Engine({OLD: ("awake", False), NEW: ("down", False)}, fail={where: exc})
    engine.install(monkeypatch)
    with pytest.raises(CheckFailed, match=f"restored: {ALIAS} points at {OLD} again") as caught:
        proofarm.prove(project, edge, NEW, ALIAS, then="promote", emulate=True)
    assert type(exc).__name__ in caught.value.message or str(exc) in caught.value.message
    assert engine.calls[-3:] == [f"down {NEW}", f"up {OLD}", f"gates {OLD}"], engine.calls
    assert journal.read(project) is None and marks(project) == {}
    assert routes.current(project, edge, ALIAS) == OLD


def test_a_failed_write_of_the_promotion_restores(tmp_path, monkeypatch):
    project, edge = example(tmp_path)
    engine = Engine({OLD: ("awake", False), NEW: ("down", False)})
    engine.install(monkeypatch)

    def full(*_a):
        raise WriteFailed("assignments.json: no space left on device")

    monkeypatch.setattr(routes, "record", full)
    with pytest.raises(CheckFailed, match="no space left"):
        proofarm.prove(project, edge, NEW, ALIAS, then="promote", emulate=True)
    assert engine.state == {OLD: ("awake", False), NEW: ("down", False)}
    assert journal.read(project) is None and marks(project) == {}


def test_a_failed_restore_after_a_pass_keeps_the_verdict_and_runs_once(tmp_path, monkeypatch):
    project, edge = example(tmp_path)
    engine = Engine({OLD: ("awake", False), NEW: ("down", False)},
                    fail={f"up {OLD}": EngineError("port 8000 taken")})  # fmt: skip
    engine.install(monkeypatch)
    report = proofarm.prove(project, edge, NEW, ALIAS, emulate=True)
    assert report.qualified and report.qualify.run == "runs/q1"
    assert "qualified, bundle runs/q1" in (report.restore_failed or "")
    assert "port 8000 taken" in (report.restore_failed or "")
    assert engine.calls.count(f"up {OLD}") == 1 and engine.calls.count(f"down {NEW}") == 1
    assert "restoring" in marks(project)[ALIAS]["stage"] and journal.read(project) is None


class Term(KeyboardInterrupt):
    signum = 15  # as stack/up.py's Signalled


@pytest.mark.parametrize(("exc", "code"), [(Term("SIGTERM"), 143), (KeyboardInterrupt(), 130)])
def test_a_signal_while_qualifying_restores_with_its_own_exit_code(
    tmp_path, monkeypatch, exc, code
):
    project, edge = example(tmp_path)
    engine = Engine({OLD: ("awake", False), NEW: ("down", False)}, fail={f"qualify {NEW}": exc})
    engine.install(monkeypatch)
    with pytest.raises(Interrupted, match="restored") as caught:
        proofarm.prove(project, edge, NEW, ALIAS, emulate=True)
    assert caught.value.exit_code == code and engine.state[OLD] == ("awake", False)


def test_an_interrupt_keeps_its_exit_code(tmp_path, monkeypatch):
    project, edge = example(tmp_path)
    said = Interrupted("SIGHUP: interrupted while starting")
    said.exit_code = 129
    engine = Engine(
        {OLD: ("awake", False), NEW: ("down", False)}, fail={f"up {NEW} emulated": said}
    )
    engine.install(monkeypatch)
    with pytest.raises(Interrupted) as caught:
        proofarm.prove(project, edge, NEW, ALIAS, emulate=True)
    assert caught.value.exit_code == 129


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), Interrupted("stopped waiting for it")])
def test_ctrl_c_during_the_restore_leaves_the_journal_to_edge_recover(tmp_path, monkeypatch, exc):
    """Bare, or as `up` says it (Interrupted): never 'restore failed' with the journal ended."""
    project, edge = example(tmp_path)
    engine = Engine({OLD: ("awake", False), NEW: ("down", False)}, fail={f"up {OLD}": exc})
    engine.install(monkeypatch)
    with pytest.raises(Interrupted, match="qualified, bundle runs/q1") as caught:
        proofarm.prove(project, edge, NEW, ALIAS, emulate=True)
    assert caught.value.exit_code == 130 and "edge recover" in (caught.value.hint or "")
    assert journal.read(project) is not None and ALIAS in marks(project)
    engine.fail.clear()
    done = recovery.recover(project, edge)
    assert done.action == f"undone: {NEW} stopped, {OLD} serving again"
    assert engine.state[OLD] == ("awake", False) and journal.read(project) is None


def test_started_beside_drains_then_sleeps_and_checks_identity_on_the_way_back(
    tmp_path, monkeypatch
):
    project, edge = example(tmp_path, standby_too=True)
    engine = Engine({OLD: ("awake", False), NEW: ("down", False)})
    engine.install(monkeypatch)
    report = proofarm.prove(project, edge, NEW, ALIAS, emulate=True)
    assert report.path == "standby"
    assert engine.calls == [f"drain {OLD}", f"sleep(abort) {OLD}", f"up {NEW} emulated",
                            f"qualify {NEW}", f"down {NEW}", *BACK_AWAKE]  # fmt: skip


@pytest.mark.parametrize(
    ("path", "was", "emulated", "expected"),
    [
        ("cold", "asleep", False, [f"sleep(abort) {NEW}", f"up {OLD}", f"gates {OLD}"]),
        ("standby", "down", True, [f"down {NEW}", *BACK_AWAKE]),
    ],
)
def test_recover_leaves_the_target_as_found_and_the_source_as_it_ran(
    tmp_path, monkeypatch, path, was, emulated, expected
):
    project, edge = example(tmp_path)
    engine = Engine(
        {OLD: ("asleep" if path == "standby" else "down", emulated), NEW: ("awake", True)}
    )
    engine.install(monkeypatch)
    journal.begin(project, ALIAS, OLD, NEW, "qualify", not emulated, path,
                  source_emulated=emulated, target_was=was)  # fmt: skip
    recovery.recover(project, edge)
    assert engine.calls == expected
    assert engine.state[OLD] == ("awake", emulated) and engine.state[NEW][0] == was


def test_an_old_journal_recovers_as_a_switch_did(tmp_path, monkeypatch):
    """Written before source_emulated/target_was: a cold switch's target down, --emulate's source."""
    project, edge = example(tmp_path)
    engine = Engine({OLD: ("down", True), NEW: ("awake", True)})
    engine.install(monkeypatch)
    entry = journal.begin(project, ALIAS, OLD, NEW, "promote", True, "cold")
    old = {k: v for k, v in entry.items() if k not in ("source_emulated", "target_was")}
    journal.journal_path(project).write_text(json.dumps(old), encoding="utf-8")
    recovery.recover(project, edge)
    assert engine.calls == [f"down {NEW}", f"up {OLD} emulated", f"gates {OLD}"]
