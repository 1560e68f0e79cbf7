"""The memory plan reads the sleeping engine's residue from what the last sleep measured, kept in
.composegen/standby/NAME.json (issue 49 #2), not from the engine's last 200 log lines: after a wake and
hundreds of requests the figure is still there (on main the plan then found none and estimated)."""

from __future__ import annotations

from types import SimpleNamespace

from composegen.project import Project
from composegen.stack import driver, sleepmode
from composegen.stack.facts import ContainerFacts

LINE = "Sleep mode freed 40.13 GiB memory, 0.87 GiB memory is still in use."


def test_the_last_sleep_s_figure_outlives_the_log_window(tmp_path, monkeypatch):
    project = Project(tmp_path)
    ctr = ContainerFacts(
        id="c1",
        name="e1",
        state="running",
        running=True,
        health=None,
        restarts=0,
        exit_code=None,
        started_at=None,
        labels={},
        image_id="i",
        networks=(),
        host_port=None,
    )
    r = SimpleNamespace(
        name="4096-131k",
        profile=SimpleNamespace(service=SimpleNamespace(port=SimpleNamespace(container=8000))),
    )
    log = [LINE]
    monkeypatch.setattr(sleepmode, "_ok", lambda *a, **k: "")
    monkeypatch.setattr(sleepmode.engine, "logs", lambda c, tail: "\n".join(log[-tail:]))
    assert sleepmode.sleep(project, r, ctr, 1).residue_gib == 0.87
    sleepmode.wake(project, r, ctr, 1)
    log.extend(f"INFO: POST /v1/chat/completions 200 OK ({i})" for i in range(300))
    assert driver.residue_kept(project, r) == 0.87
    assert sleepmode.residue_kept(project, "never-slept") is None
