"""`qualify --emulate` and `qualify --alias` with standby stacks on the real engine (issue 37, issue 40 #4).

`qualify NEW --sleep-cycles 3 --emulate` starts the stack that is not up (emulated, with sleep mode), passes,
and leaves it down again; with the emulator's residue-growth fault it fails on the sleep criterion. With
`--alias`, the serving engine is put to sleep, not downed: NEW is started beside it (or woken, when it is
resident and asleep), qualified, then the old engine is woken back (`--then restore`) or the alias moves to
NEW (`--then promote`) — no container of the serving stack restarts, and a client polling the alias sees
only the old model, 503 + Retry-After + stage, then the old or the new model."""

from __future__ import annotations

import json

import pytest

from tests.edge.test_qualify_alias_engine import assigned, polled, set_fault, with_qualify
from tests.support.edge import EdgeProject, edge_project, phases, serving

pytestmark = pytest.mark.docker
EMU = {
    "EMU_WEIGHTS_GIB": "0.0043",
    "EMU_DECODE_TOK_S": "200",
}  # the recording's tiny model: its wake waits max(0.34 s, the copy back)


@pytest.fixture
def edge(tmp_path, edge_img):
    # at 0.45 of the emulated GPU each, both fit awake (the started-beside path needs no plan refusal)
    project = edge_project(tmp_path, edge_img, load=2, standby=True, both_env=EMU, share=0.45)
    with_qualify(project, project.old, project.new)
    with serving(project) as ready:
        yield ready


def running(edge: EdgeProject, name: str) -> bool:
    report = json.loads(edge.ok("status", "--json"))
    return any(s["profile"] == name for s in report["stacks"])


def test_qualify_emulate_starts_what_is_down_and_fails_on_residue_growth(edge):
    argv = ("qualify", edge.new, "--sleep-cycles", "3", "--emulate", "--json")
    res = edge.cli(*argv, timeout=600)
    assert res.returncode == 0, (res.stdout, res.stderr)
    good = json.loads(res.stdout)
    assert good["qualified"] and good["emulated"], good["criteria"]
    (crit,) = [c for c in good["criteria"] if c["name"] == "sleep"]
    assert crit["passed"] and len(good["sleep"]["cycles"]) == 3, good["sleep"]
    assert not running(edge, edge.new)  # left as found: down
    assert running(edge, edge.old)

    set_fault(edge, edge.new, "sleep_residue_growth")
    res = edge.cli(*argv, timeout=600)
    assert res.returncode == 1, (res.stdout, res.stderr)
    bad = json.loads(res.stdout)
    (crit,) = [c for c in bad["criteria"] if c["name"] == "sleep"]
    assert not crit["passed"] and "GPU memory grew" in crit["reason"], crit
    assert bad["sleep"]["residue_growth_gib"] > 0.5
    assert not running(edge, edge.new)

    # up and awake beside the serving stack: qualified where it runs, no 503, and promoted on the pass
    set_fault(edge, edge.new, None)
    edge.ok("up", edge.new, "--emulate", timeout=600)
    argv = ("qualify", edge.new, "--alias", "ds4-flash", "--then", "promote", "--json")
    found: dict = {}
    seen = polled(edge, lambda: found.update(json.loads(edge.ok(*argv, timeout=600))))
    assert (found["path"], found["serving_after"], found["steps"]) == ("unchanged", edge.new, []), (
        found
    )
    assert "up and awake beside" in found["path_reason"]
    assert phases(seen) == [f"{edge.old}-served", f"{edge.new}-served"], phases(seen)
    assert running(edge, edge.old)  # untouched


def test_qualify_in_the_alias_place_by_sleep_restores_then_promotes(edge):
    old_model, new_model = f"{edge.old}-served", f"{edge.new}-served"
    started = edge.container_started(edge.old)
    # NEW is down: started beside the serving engine put to sleep, then down again, the old one woken
    argv = ("qualify", edge.new, "--alias", "ds4-flash", "--emulate", "--json")
    found: dict = {}
    seen = polled(edge, lambda: found.update(json.loads(edge.ok(*argv, timeout=600))))
    assert found["qualified"] and found["path"] == "standby", found
    steps = [s["step"] for s in found["steps"]]
    # drained as a switch drains; the old engine checked to be itself before its gates
    assert steps == ["draining", f"putting {edge.old} to sleep", f"starting {edge.new}",
                     f"qualifying {edge.new}", f"stopping {edge.new}", f"waking {edge.old}", "warm-up",
                     "identity", f"gates on {edge.old}"], steps  # fmt: skip
    assert phases(seen) == [old_model, "503", old_model], phases(seen)
    assert not running(edge, edge.new) and edge.container_started(edge.old) == started

    # NEW resident and asleep: woken, qualified, promoted; the old engine stays resident, asleep
    edge.ok("up", edge.new, "--emulate", "--standby", timeout=600)
    started_new = edge.container_started(edge.new)
    argv = ("qualify", edge.new, "--alias", "ds4-flash", "--then", "promote", "--json")
    promoted: dict = {}
    seen = polled(edge, lambda: promoted.update(json.loads(edge.ok(*argv, timeout=600))))
    assert promoted["path"] == "standby" and promoted["serving_after"] == edge.new, promoted
    steps = [s["step"] for s in promoted["steps"]]
    assert steps == ["draining", f"putting {edge.old} to sleep", f"waking {edge.new}", "warm-up",
                     "identity", f"gates on {edge.new}", f"qualifying {edge.new}"], steps  # fmt: skip
    # a sleep and a wake, not a reload: seconds (the bound only says "not a cold start")
    wake = {s["step"]: s["seconds"] for s in promoted["steps"]}
    assert wake[f"putting {edge.old} to sleep"] + wake[f"waking {edge.new}"] < 10, wake
    assert phases(seen) == [old_model, "503", new_model], phases(seen)
    told = {s[2] for s in seen if s[0] == 503}  # a 0.1 s step may fall between two polls
    assert told <= {*steps, f"qualifying {edge.new}: gates 1/1: smoke"}, told
    assert assigned(edge)[-1]["evidence"]["kind"] == "qualify"
    status = {
        s["profile"]: s["endpoint"]["sleeping"]
        for s in json.loads(edge.ok("status", "--json"))["stacks"]
    }
    assert status[edge.old]["level"] == 1 and status[edge.new] is None, status
    # nothing restarted
    assert (edge.container_started(edge.old), edge.container_started(edge.new)) == (
        started,
        started_new,
    )
