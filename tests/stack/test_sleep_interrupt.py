"""A Ctrl-C or signal while composegen puts an engine to sleep (issue 49) acts once the /sleep is
answered and recorded: cut short, the engine went on falling asleep after an undo had asked it (it says
"awake" until it sleeps) and found nothing to wake, so the alias rested on a sleeping engine. A second
signal acts at once; a failed /sleep still acts on the signal; an ignored signal (nohup) stays ignored
and disarms nothing. Real signals (signal.raise_signal), SIGTERM and SIGHUP raised as the switch raises
them (driver.signals_as_interrupts). The engine's answer is a stand-in here
(tests/edge/test_standby_interrupt_engine.py interrupts a real emulated one mid-sleep). The same helper
holds Ctrl-C during the CLI's imports (composegen/interrupts.py)."""

from __future__ import annotations

import json
import signal
from types import SimpleNamespace
from typing import Any

import pytest

from composegen import interrupts
from composegen.errors import EngineError
from composegen.project import Project
from composegen.stack import driver, sleepmode

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@pytest.fixture
def put_to_sleep(tmp_path, monkeypatch):
    """sleepmode.sleep of a stand-in engine whose /sleep gets SIGNALS while it is under way (then
    fails with FAIL), under the switch's signal handlers."""
    saved = {s: signal.getsignal(s) for s in SIGNALS}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    monkeypatch.setattr(sleepmode.engine, "logs", lambda ctr, tail=None: "")
    r = SimpleNamespace(
        name="a",
        profile=SimpleNamespace(service=SimpleNamespace(port=SimpleNamespace(container=8000))),
    )
    project, answered = Project(tmp_path), []

    def run(*signals: int, fail: Exception | None = None) -> None:
        def slept(ctr, port, call):
            for sig in signals:
                signal.raise_signal(sig)
            answered.append(call.path)
            if fail is not None:
                raise fail
            return ""

        monkeypatch.setattr(sleepmode, "_ok", slept)
        with driver.signals_as_interrupts():
            sleepmode.sleep(project, sleepmode.Handle(r, None, None), 1)  # type: ignore[arg-type]

    try:
        yield run, answered, tmp_path / ".composegen/standby/a.json"
        handlers = {s: signal.getsignal(s) for s in SIGNALS}
        assert handlers == {**saved, signal.SIGINT: signal.default_int_handler}, handlers
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)


def _signum(exc: pytest.ExceptionInfo) -> int:
    return getattr(exc.value, "signum", signal.SIGINT)


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_a_signal_during_a_sleep_acts_once_it_is_answered_and_recorded(put_to_sleep, sig):
    run, answered, record = put_to_sleep
    with pytest.raises(KeyboardInterrupt) as exc:
        run(sig)
    assert _signum(exc) == sig
    assert answered == ["/sleep?level=1&mode=wait"]
    assert json.loads(record.read_text())["level"] == 1


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_a_second_signal_acts_at_once(put_to_sleep, sig):
    run, answered, record = put_to_sleep
    with pytest.raises(KeyboardInterrupt) as exc:
        run(sig, signal.SIGINT)
    assert _signum(exc) == signal.SIGINT
    assert answered == [] and not record.exists()


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_a_signal_during_a_sleep_that_fails_is_not_lost(put_to_sleep, sig):
    run, answered, record = put_to_sleep
    with pytest.raises(KeyboardInterrupt) as exc:
        run(sig, fail=EngineError("a: POST /sleep answered 500"))
    assert _signum(exc) == sig and isinstance(exc.value.__context__, EngineError)
    assert answered == ["/sleep?level=1&mode=wait"] and not record.exists()


def test_a_signal_while_the_hold_is_being_installed_is_held_and_then_undone(
    put_to_sleep, monkeypatch
):
    """Sent the moment the first signal's hold is in place (before the others are): held, the sleep
    answered and kept, then acted on; no hold left installed."""
    run, answered, record = put_to_sleep
    real, sent = signal.signal, []

    def installing(sig, handler):
        previous = real(sig, handler)
        ours = ("default_int_handler", "_raise_signalled")  # Python's, the switch's
        if not sent and callable(handler) and getattr(handler, "__name__", "") not in ours:
            sent.append(sig)  # the first hold is in, the rest are not
            signal.raise_signal(signal.SIGINT)
        return previous

    monkeypatch.setattr(signal, "signal", installing)
    with pytest.raises(KeyboardInterrupt) as exc:
        run()
    monkeypatch.undo()
    assert sent and _signum(exc) == signal.SIGINT, sent
    assert answered == ["/sleep?level=1&mode=wait"] and record.exists()


def test_an_ignored_sighup_stays_ignored_and_the_others_stay_held(put_to_sleep):
    """Under nohup SIGHUP is ignored: it still is during the switch and its sleep, and a Ctrl-C after
    it is still held until the sleep is answered."""
    run, answered, record = put_to_sleep
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with pytest.raises(KeyboardInterrupt) as exc:
            run(signal.SIGHUP, signal.SIGINT)
        assert _signum(exc) == signal.SIGINT
        assert answered == ["/sleep?level=1&mode=wait"] and record.exists()
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)


def test_a_handler_set_outside_python_is_left_alone(monkeypatch):
    """getsignal's None (a handler Python did not install) cannot be put back: not touched."""
    real = signal.getsignal
    monkeypatch.setattr(signal, "getsignal", lambda s: None if s == signal.SIGHUP else real(s))
    before = real(signal.SIGHUP)
    with interrupts.deferred(signal.SIGINT, signal.SIGHUP):
        assert real(signal.SIGHUP) is before and real(signal.SIGINT) is not before
    assert real(signal.SIGHUP) is before


def test_the_cli_imports_hold_a_ctrl_c_even_when_the_import_fails():
    """cli/entry.py's guard: a Ctrl-C inside an import that then fails acts (exit 130), not lost."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt) as exc, interrupts.deferred():
            signal.raise_signal(signal.SIGINT)
            raise ImportError("a half-loaded module")
        assert isinstance(exc.value.__context__, ImportError)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)


def _stack(name: str = "a") -> SimpleNamespace:
    return SimpleNamespace(name=name, profile=SimpleNamespace(standby=SimpleNamespace(level=1)))


def test_sigterm_while_a_stack_sleeps_without_an_edge_acts_as_ctrl_c(tmp_path):
    """No edge.yaml (no lock, no alias): a SIGTERM inside `sleeping` still unwinds as Ctrl-C does
    (exit 143 through the caller's cleanup), not the process killed where it stands."""
    from composegen.edge import asleep

    class Killed(Exception):
        pass

    def killed(signum, frame):
        raise Killed  # what SIG_DFL would do: end the process, no cleanup

    previous = signal.signal(signal.SIGTERM, killed)
    try:
        stack: Any = _stack()
        with (
            pytest.raises(KeyboardInterrupt) as exc,
            asleep.sleeping(Project(tmp_path), stack, "q"),
        ):
            signal.raise_signal(signal.SIGTERM)
        assert _signum(exc) == signal.SIGTERM
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_wake_of_an_awake_stack_is_nothing_to_wake_beside_a_campaign(tmp_path, monkeypatch):
    """A campaign keeps another alias's engine asleep (its journal): `wake` of an awake stack says
    "nothing to wake" (exit 0), as before the lock existed; it never waits on the lock or refuses."""
    from composegen.edge import asleep, journal

    project, r = Project(tmp_path), _stack()
    monkeypatch.setattr(asleep.config, "configured", lambda project: True)
    monkeypatch.setattr(asleep.config, "load", lambda project: SimpleNamespace(stacks={}))
    monkeypatch.setattr(
        asleep.driver, "handles", lambda *a, **k: {"a": sleepmode.Handle(r, None, None)}
    )
    journal.begin(project, "other", "b", "b", "campaign", True, "standby", True, "awake")
    woken = asleep.wake(project, r, None)  # type: ignore[arg-type]
    assert woken.action == "a is awake: nothing to wake" and woken.stages == [], woken
