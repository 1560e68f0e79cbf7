"""The memory plan reads the sleeping engine's residue from what the last sleep measured, kept in
.composegen/standby/NAME.json (issue 49 #2), not from the engine's last 200 log lines: after a wake and
hundreds of requests the figure is still there (on main the plan then found none and estimated)."""

from __future__ import annotations

import json
from types import SimpleNamespace

from hypothesis import given

from composegen.project import Project
from composegen.stack import driver, sleepmode
from composegen.stack.facts import ContainerFacts
from tests.test_fuzz_inputs import FUZZ, SCALARS

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
        profile=SimpleNamespace(
            service=SimpleNamespace(
                port=SimpleNamespace(container=8000), gpus=SimpleNamespace(ids=lambda: ["0"])
            )
        ),
    )
    log = [LINE]
    monkeypatch.setattr(sleepmode, "_ok", lambda *a, **k: "")
    monkeypatch.setattr(sleepmode.engine, "logs", lambda c, tail: "\n".join(log[-tail:]))
    assert sleepmode.sleep(project, sleepmode.Handle(r, ctr, None), 1).residue_gib == 0.87
    sleepmode.wake(project, r, ctr, 1)
    log.extend(f"INFO: POST /v1/chat/completions 200 OK ({i})" for i in range(300))
    assert driver.residue_kept(project, r.name) == 0.87
    assert sleepmode.residue_kept(project, "never-slept") is None


@FUZZ
@given(value=SCALARS)
def test_any_kept_residue_is_a_figure_or_none(tmp_path_factory, value):
    """A hand-edited record (nan, 1e999, a string, 2**70…) is a finite figure or none, never a crash."""
    project = Project(tmp_path_factory.mktemp("kept"))
    path = sleepmode._record(project, "x")
    path.write_text(json.dumps({"residue_gib": value}))
    found = sleepmode.residue_kept(project, "x")
    assert found is None or 0 <= found < 1e6
