"""A Ctrl-C or signal while composegen puts an engine to sleep (issue 49) acts once the /sleep is
answered and recorded: cut short, the engine went on falling asleep after an undo had asked it (it says
"awake" until it sleeps) and found nothing to wake, so the alias rested on a sleeping engine. A second
signal acts at once. The engine's answer is a stand-in here (tests/edge/test_standby_interrupt_engine.py
interrupts a real emulated one mid-sleep)."""

from __future__ import annotations

import json
import signal
from types import SimpleNamespace

import pytest

from composegen.project import Project
from composegen.stack import sleepmode


@pytest.fixture
def put_to_sleep(tmp_path, monkeypatch):
    """sleepmode.sleep of a stand-in engine whose /sleep gets SIGNALS while it is under way."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    monkeypatch.setattr(sleepmode.engine, "logs", lambda ctr, tail=None: "")
    r = SimpleNamespace(
        name="a",
        profile=SimpleNamespace(service=SimpleNamespace(port=SimpleNamespace(container=8000))),
    )
    project, answered = Project(tmp_path), []

    def run(*signals: int) -> None:
        def slept(ctr, port, call):
            for sig in signals:
                signal.raise_signal(sig)
            answered.append(call.path)
            return ""

        monkeypatch.setattr(sleepmode, "_ok", slept)
        sleepmode.sleep(project, sleepmode.Handle(r, None, None), 1)  # type: ignore[arg-type]

    yield run, answered, tmp_path / ".composegen/standby/a.json"
    signal.signal(signal.SIGINT, previous)


def test_a_ctrl_c_during_a_sleep_acts_once_it_is_answered_and_recorded(put_to_sleep):
    run, answered, record = put_to_sleep
    with pytest.raises(KeyboardInterrupt):
        run(signal.SIGINT)
    assert answered == ["/sleep?level=1&mode=wait"]
    assert json.loads(record.read_text())["level"] == 1
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_second_ctrl_c_acts_at_once(put_to_sleep):
    run, answered, record = put_to_sleep
    with pytest.raises(KeyboardInterrupt):
        run(signal.SIGINT, signal.SIGINT)
    assert answered == [] and not record.exists()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
