"""A bracketed campaign on standby stacks, on the real engine with the emulated vLLM (issue 37 item
4): the control is kept asleep while the candidate runs and the bracket wakes it — the same
container, never recreated, so no second cold start — and the record says which path each arm
took. Standby stacks sit behind an edge (their dev routes never on a published port), so the edge
is up first, as docs/campaign.md says. At the end both engines stay resident (the control awake,
serving the alias; the candidate asleep), so `campaign decide --promote` then `promote` switch by
sleep in seconds: no container recreated. Without --bracket the same end: the engine the alias
serves awake (the control woken again, or the candidate left awake when the alias served it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from composegen.campaign import state
from tests.support.campaigns import own_gpu_ids
from tests.support.edge import EdgeProject, Poller, edge_project, phases
from tests.support.helpers import REPO

pytestmark = pytest.mark.docker


def test_a_standby_campaign_wakes_its_control_and_leaves_both_resident_for_a_promote_by_sleep(
    tmp_path, edge_img
):
    # the recording's 6.5 GiB model: a level-1 wake copies it back in ~0.34 s
    # both call tools: the candidate promoted at the end passed its gates (a failed gate is not promoted)
    edge = edge_project(tmp_path, edge_img, load=2, standby=True, gpu=own_gpu_ids(1)[0],
                        both_env={"EMU_WEIGHTS_GIB": "6.5"}, tools=True)  # fmt: skip
    control, candidate = edge.old, edge.new
    directory = edge.root / "runs" / "campaigns" / "sb"
    argv = [sys.executable, "-m", "composegen", "--root", str(edge.root), "campaign", "run",
            control, candidate, "--bracket", "--gate", "--tools", "2", "--ladder", "2000",
            "--emulate", "--name", "sb"]  # fmt: skip
    try:
        edge.ok("edge", "up")
        # a client polls the alias (the control) through TLS from the first arm to the promote
        with _polling(edge) as poller:
            started = _run_watched(edge, argv)
            _resident_then_promoted(edge, directory, started)
            poller.wait_for(len(poller.seen) + 2)
        models = (f"{control}-served", f"{candidate}-served")
        assert not poller.untold(*models), poller.untold(*models)[:5]
        # down before the control's arm, asleep through the candidate's, then the switch: each told
        assert phases(poller.seen) == ["503", models[0], "503", models[0], "503", models[1]]
        assert _slept(poller, control), {s[2] for s in poller.seen if s[0] == 503}
    finally:
        edge.cleanup()


def _polling(edge: EdgeProject) -> Poller:
    """A client polling the alias through TLS, twice a second (a campaign runs for minutes)."""
    return Poller(edge, edge.ok("edge", "keys", "add", "campaign").strip(), pause_s=0.5)


def _slept(poller: Poller, name: str) -> bool:
    """The poller was told that the alias's engine NAME was asleep (composegen's stage)."""
    return any(s[0] == 503 and f"ds4-flash's engine {name} is asleep" in s[2] for s in poller.seen)


def _run_watched(edge: EdgeProject, argv: list[str]) -> dict[str, str]:
    """`campaign run` (ARGV) to its end: when each engine's container started, as the arms saw it."""
    control, candidate = edge.old, edge.new
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip
    started: dict[str, str] = {}
    assert proc.stderr is not None
    said: list[str] = []
    for line in proc.stderr:
        said.append(line)
        # the control's container as its arm left it (asleep), and as the bracket found it
        if line.startswith(f"campaign: control ({control}): done"):
            started["control"] = edge.container_started(control)
        if line.startswith(f"arm 3/3: bracket {control} · gates 1/"):
            started["bracket"] = edge.container_started(control)
            started["candidate"] = edge.container_started(candidate)
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out + "".join(said[-30:])
    assert started["control"] and started["bracket"] == started["control"], started
    return started


def _resident_then_promoted(edge: EdgeProject, directory: Path, started: dict[str, str]) -> None:
    """The record of the bracketed campaign, both engines left resident, then a promote by sleep."""
    control, candidate = edge.old, edge.new
    log = (directory / state.LOG).read_text(encoding="utf-8")
    assert f"control: evidence control/; {control} to sleep" in log
    assert f"bracket: woke {control} in " in log and "bracket: attaching" not in log
    st = state.load(directory)
    assert [(a.key, a.status, a.path) for a in st.arms] == [
        ("control", "done", "cold"),
        ("candidate", "done", "cold"),
        ("bracket", "done", "wake"),
    ]
    assert st.bracket is not None and st.bracket.passed and st.bracket.replay == "wake"
    doc = json.loads((directory / "comparison.json").read_text(encoding="utf-8"))
    assert doc["bracket"]["replay"] == "wake"
    md = (directory / "campaign.md").read_text(encoding="utf-8")
    assert "woke its engine from sleep (standby) instead of starting it again" in md
    assert "path per arm: control cold, candidate cold, bracket wake" in md
    # one cold start: the log the bracket captured continues the control arm's own
    first = (directory / "control" / "startup.log").read_text(encoding="utf-8")
    assert (directory / "bracket" / "startup.log").read_text(encoding="utf-8").startswith(first)

    # left resident: the control awake (its alias), the candidate asleep, as a switch needs
    assert st.residency is not None and st.residency.resident, st.residency
    assert f"candidate: {candidate} asleep beside {control} awake" in log
    assert f"bracket: evidence bracket/; {control} left awake (resident)" in log
    assert "At the end both engines were resident" in md
    sleeping = {s["profile"]: s["endpoint"]["sleeping"]
                for s in json.loads(edge.ok("status", "--json"))["stacks"]}  # fmt: skip
    assert sleeping[control] is None and sleeping[candidate]["level"] == 1, sleeping
    # `up --standby` of the sleeping candidate changes nothing and says so (no gates ran)
    again = edge.ok("up", candidate, "--emulate", "--standby")
    assert f"{candidate}: already asleep, no gates run (level 1)" in again, again
    edge.ok("campaign", "decide", "sb", "--promote", "--why", "faster at equal quality")
    switched = json.loads(edge.ok("promote", candidate, "--alias", "ds4-flash", "--campaign",
                                  "sb", "--emulate", "--json"))  # fmt: skip
    assert switched["path"] == "standby", switched
    assert [s["step"] for s in switched["steps"]][:3] == [
        "draining",
        f"putting {control} to sleep",
        f"waking {candidate}",
    ]
    steps = {s["step"]: s["seconds"] for s in switched["steps"]}
    # a switch, not a cold start: sleep + wake in seconds (the gates run a few requests)
    assert steps[f"putting {control} to sleep"] + steps[f"waking {candidate}"] < 3, steps
    assert switched["seconds"] < 15, switched
    # no container recreated: both are the ones the campaign started
    assert edge.container_started(control) == started["control"]
    assert edge.container_started(candidate) == started["candidate"]


def test_when_the_plan_refuses_the_pair_the_candidate_is_taken_down_and_the_record_says_why(
    tmp_path, edge_img
):
    # a 10 GiB emulated GPU: the candidate (0.5) runs beside the control asleep, but the control
    # (0.95) cannot wake beside the candidate asleep (9.5 + its estimated 1 GiB residue > 10 GiB)
    edge = edge_project(tmp_path, edge_img, load=2, standby=True, gpu=own_gpu_ids(1)[0], share=0.5,
                        both_env={"EMU_GPU_GIB": "10", "EMU_WEIGHTS_GIB": "1"})  # fmt: skip
    control, candidate = edge.old, edge.new
    path = edge.root / "profiles" / f"{control}.yaml"
    path.write_text(
        path.read_text(encoding="utf-8").replace(
            "gpu-memory-utilization: 0.5", "gpu-memory-utilization: 0.95"
        ),
        encoding="utf-8",
    )
    edge.ok("render")
    try:
        edge.ok("edge", "up")
        with _polling(edge) as poller:
            edge.ok("campaign", "run", control, candidate, "--bracket", "--emulate", "--name", "sb")
            poller.wait_for(len(poller.seen) + 2)
        # the alias's engine down, serving, asleep, woken, down again (not resident): each told
        assert not poller.untold(f"{control}-served"), poller.untold(f"{control}-served")[:5]
        assert _slept(poller, control) and phases(poller.seen)[-1] == "503", phases(poller.seen)
        directory = edge.root / "runs" / "campaigns" / "sb"
        st = state.load(directory)
        assert st.residency is not None and not st.residency.resident
        assert f"the memory plan refuses {control} awake beside {candidate} asleep" in (
            st.residency.reason
        )
        assert "GiB > 10.00 GiB" in st.residency.reason, st.residency.reason
        log = (directory / state.LOG).read_text(encoding="utf-8")
        assert f"candidate: evidence candidate/; down {candidate}" in log
        assert f"bracket: evidence bracket/; down {control}" in log
        assert st.bracket is not None and st.bracket.replay == "wake"
        md = (directory / "campaign.md").read_text(encoding="utf-8")
        assert "At the end both engines were not resident: " in md
    finally:
        edge.cleanup()


@pytest.mark.parametrize("serving", ["control", "candidate"])
def test_a_campaign_without_bracket_leaves_both_resident_with_the_alias_s_engine_awake(
    tmp_path, edge_img, serving
):
    # the recording's 4.6 MB model: a wake is the recorded one
    edge = edge_project(tmp_path, edge_img, load=2, standby=True, gpu=own_gpu_ids(1)[0],
                        both_env={"EMU_WEIGHTS_GIB": "0.0043"})  # fmt: skip
    control, candidate = edge.old, edge.new
    awake, asleep = (control, candidate) if serving == "control" else (candidate, control)
    if serving == "candidate":  # the alias already serves the candidate when the campaign runs
        path = edge.root / "edge.yaml"
        text = path.read_text(encoding="utf-8")
        path.write_text(text.replace(f"ds4-flash: {control}", f"ds4-flash: {candidate}"), "utf-8")
        edge.ok("render")
    directory = edge.root / "runs" / "campaigns" / "nb"
    try:
        edge.ok("edge", "up")
        with _polling(edge) as poller:
            edge.ok("campaign", "run", control, candidate, "--emulate", "--name", "nb", timeout=600)
            poller.wait_for(len(poller.seen) + 2)
        # down until its arm; the control's engine asleep through the candidate's arm, then woken
        assert not poller.untold(f"{awake}-served"), poller.untold(f"{awake}-served")[:5]
        assert _slept(poller, control) == (serving == "control"), phases(poller.seen)
        assert phases(poller.seen)[-1] == f"{awake}-served", phases(poller.seen)
        st = state.load(directory)
        assert [(a.key, a.status, a.path) for a in st.arms] == [
            ("control", "done", "cold"),
            ("candidate", "done", "cold"),
        ]
        assert st.residency is not None and st.residency.resident, st.residency
        assert st.residency.awake == awake, st.residency
        log = (directory / state.LOG).read_text(encoding="utf-8")
        assert f"control: evidence control/; {control} to sleep" in log
        assert f"candidate: {asleep} asleep beside {awake} awake" in log, log
        if serving == "control":  # the end swaps: the candidate sleeps, the control wakes
            assert f"candidate: evidence candidate/; {candidate} to sleep" in log
            assert f"candidate: woke {control} in " in log
        else:  # the candidate serves: it stays awake, the control asleep since its arm
            assert f"candidate: evidence candidate/; {candidate} left awake (resident)" in log
        md = (directory / "campaign.md").read_text(encoding="utf-8")
        assert "At the end both engines were resident" in md
        sleeping = {s["profile"]: s["endpoint"]["sleeping"]
                    for s in json.loads(edge.ok("status", "--json"))["stacks"]}  # fmt: skip
        assert sleeping[awake] is None and sleeping[asleep]["level"] == 1, sleeping
        started = {name: edge.container_started(name) for name in (control, candidate)}
        # the other engine is one switch by sleep away: no container recreated
        edge.ok("campaign", "decide", "nb", "--promote", "--why", "faster at equal quality")
        res = edge.cli("promote", candidate, "--alias", "ds4-flash", "--campaign", "nb", "--emulate",
                       "--json")  # fmt: skip
        assert res.returncode == 0, res.stderr
        switched = json.loads(res.stdout)
        if serving == "candidate":  # the alias already serves it: the loop closes, nothing moves
            assert switched["path"] == "unchanged", switched
        else:
            assert switched["path"] == "standby", switched
            assert [s["step"] for s in switched["steps"]][:3] == [
                "draining",
                f"putting {control} to sleep",
                f"waking {candidate}",
            ]
        assert {n: edge.container_started(n) for n in (control, candidate)} == started
    finally:
        edge.cleanup()
