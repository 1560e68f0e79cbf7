"""The gates' client preload of a standby switch (edge/standby.py): started only once the memory plan
passed (a refused switch, exit 2, loads nothing), and whatever it raises stays in its thread — no
traceback through threading.excepthook; the gates, when they then need the client, say it as an
EngineError (the old engine woken again, exit 3)."""

from __future__ import annotations

import threading

import pytest

from composegen.edge import standby, switch
from composegen.edge.timeline import Timeline
from composegen.errors import BadInput, EngineError
from composegen.project import Project
from tests.support.helpers import make_project


def test_a_failing_preload_prints_nothing_and_the_gates_say_it_as_an_engine_error(monkeypatch):
    hooked: list[threading.ExceptHookArgs] = []
    monkeypatch.setattr(threading, "excepthook", hooked.append)

    def broken() -> None:
        raise ModuleNotFoundError("No module named 'openai'")

    monkeypatch.setattr(standby.gatecheck, "preload_gates", broken)
    preload = standby.preload_gates()
    preload.join(5)
    assert not preload.is_alive() and hooked == []

    def gates(r, only):
        import composegen_no_such_client  # noqa: F401  (a broken install's import)

    monkeypatch.setattr(standby.gatecheck, "require_gates", gates)
    r = type("R", (), {"name": "4096-131k"})()
    with pytest.raises(EngineError) as caught:
        standby._gates(r, None)
    assert caught.value.exit_code == 3
    assert caught.value.message == (
        "4096-131k: the gates' client does not import "
        "(ModuleNotFoundError: No module named 'composegen_no_such_client')"
    )


def test_a_switch_the_plan_refuses_starts_no_preload(tmp_path, monkeypatch):
    project = Project(make_project(tmp_path, {}))
    started: list[str] = []
    monkeypatch.setattr(switch.routes, "current", lambda *a: "8192-131k")
    monkeypatch.setattr(switch.Switch, "why_not", lambda self: None)  # both resident
    monkeypatch.setattr(switch.service, "running", lambda *a: {})  # the edge runs
    monkeypatch.setattr(switch.standby, "preload_gates", lambda: started.append("preload"))

    def refuse(*args):
        raise BadInput("GPU 0: 185.27 GiB > 95.01 GiB")

    monkeypatch.setattr(switch.standbyplan, "check_switch", refuse)
    with pytest.raises(BadInput) as caught:
        switch.Switch(
            project, None, "ds4", "4096-131k", "promote", None, False, None, Timeline()
        ).run()
    assert caught.value.exit_code == 2 and started == []
    # the plan passes: the preload starts (and the switch goes on, to the journal)
    monkeypatch.setattr(switch.standbyplan, "check_switch", lambda *a: None)
    monkeypatch.setattr(switch.journal, "begin", lambda *a: (_ for _ in ()).throw(RuntimeError))
    with pytest.raises(RuntimeError):
        switch.Switch(
            project, None, "ds4", "4096-131k", "promote", None, False, None, Timeline()
        ).run()
    assert started == ["preload"]
