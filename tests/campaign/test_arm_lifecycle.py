"""The campaign's state machine against a fake stack driver (no engine): an interrupted arm resumes
by attaching to its still-loading stack, a failed arm keeps its error and is tried again, an arm
whose bundle is in only needs its down, a done arm is never run again. Evidence is written from the
seed's recorded r33 arm logs, so the records at the end are the real ones. Both kinds of arm go
through the one run_arm, and "already running, so attach" is decided in the driver alone."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from composegen import privatestate
from composegen.campaign import arm as run_arm
from composegen.campaign import exclusive, precheck, qualifyarm, resident, runner, state
from composegen.campaign.progress import CampaignProgress, label
from composegen.campaign.reports import ArmState, CampaignOptions
from composegen.edge import asleep, journal, routes
from composegen.errors import BadInput, CheckFailed, EngineError, Interrupted
from composegen.evidence import bundle, capture
from composegen.project import Project
from composegen.stack import driver
from composegen.stack.progress import ProgressSink
from composegen.stack.reports import DownReport, UpReport
from composegen.stack.sleepmode import Asleep
from composegen.vllm import startup
from tests.support.campaigns import ARM_LOGS, DATA
from tests.support.helpers import REPO, make_project

CONTROL, CANDIDATE = "8192-131k", "4096-131k"


class FakeDriver:
    """What the campaign asks of stack.driver, with no engine: which stacks run, in what state
    (loading, ready, asleep), every call in order, and failures on cue (`fail[(call, profile)]`)."""

    UpOptions, signals_as_interrupts = driver.UpOptions, staticmethod(driver.signals_as_interrupts)

    def __init__(self) -> None:
        self.stacks: dict[str, str] = {}
        self.calls: list[tuple[str, str]] = []
        self.fail: dict[tuple[str, str], BaseException] = {}
        self.seen_at_sleep: list[tuple[str | None, str | None]] = []

    def _cue(self, call: str, name: str) -> None:
        exc = self.fail.pop((call, name), None)
        if exc is not None:
            raise exc

    def up_or_attach(self, project, r, opts, sink):
        attached = f"{r.name} is already starting" if r.name in self.stacks else None
        self.calls.append(("attach" if attached else "up", r.name))
        self.stacks[r.name] = "loading"
        sink.phase("starting", 0.0)
        self._cue("up", r.name)  # e.g. Ctrl-C while it loads: the stack goes on loading
        self.stacks[r.name] = "ready"
        report = UpReport(name=r.name, project=f"composegen-{r.name}", emulated=True, checks=[])
        report.time_to_ready_s = 1.5
        return report, attached

    def down(self, project, r, timeout=None):
        self.calls.append(("down", r.name))
        self._cue("down", r.name)
        self.stacks.pop(r.name, None)
        return DownReport(name=r.name, project=f"composegen-{r.name}", removed=[])

    def gpu_claims(self, r):
        return []

    def sleep_state(self, project, r, strict=False):
        if self.stacks.get(r.name) != "asleep":
            return None
        return Asleep(level=1, since="2026-12-05T05:00:00Z", residue_gib=0.86)

    def sleep_stack(self, project, r, level=None, mode="wait"):
        self.calls.append(("sleep", r.name))
        self.seen_at_sleep.append(told_at(project))  # what clients and recover saw as it slept
        self.stacks[r.name] = "asleep"

    def wake_stack(self, project, r):
        self.calls.append(("wake", r.name))
        self._cue("wake", r.name)
        self.stacks[r.name] = "ready"
        return 0.31

    def up(self, project, r, opts, sink=None):
        return self.up_or_attach(project, r, opts, sink or ProgressSink())[0]

    def engine_info(self):  # the campaign's check before arm 1 (precheck.py)
        return {}

    def project_containers(self, project):
        return [project] if project.removeprefix("composegen-") in self.stacks else []

    def deployment(self, project, r):  # out/ files only: whether the stack is behind the edge
        return driver.deployment(project, r)

    def loopback_conflict(self, port, field):
        return None


def told_at(project: Project) -> tuple[str | None, str | None]:
    """(the stage the alias ds4-flash answers with, what the switch journal holds it for)."""
    path = routes.routes_path(project)
    route = privatestate.read_json(path, {}).get("aliases", {}).get("ds4-flash") or {}
    entry = journal.read(project)
    held = f"{entry['by']} {entry['target']}" if entry else None
    return (route.get("switch") or {}).get("stage"), held


class Told(CampaignProgress):
    """What the campaign told a person, in order; a fresh sink per arm."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.sinks: list[ProgressSink] = []

    def arm_started(self, index, total, arm):
        self.lines.append(label(index, total, arm))
        self.sinks.append(ProgressSink())
        return self.sinks[-1]

    def arm_ready(self, arm, report, how):
        self.lines.append(f"{arm.key} ready ({how})")

    def step(self, text):
        self.lines.append(text)

    def say(self, text):
        self.lines.append(text)


@pytest.fixture
def fake(monkeypatch):
    return driven(monkeypatch)


def driven(monkeypatch) -> FakeDriver:
    """The fake driver wherever an arm asks, and evidence from the recorded arm logs."""
    fake = FakeDriver()
    monkeypatch.setattr(run_arm, "driver", fake)
    monkeypatch.setattr(exclusive, "driver", fake)
    monkeypatch.setattr(precheck, "driver", fake)
    monkeypatch.setattr(asleep, "driver", fake)
    failing: dict[str, BaseException] = {}

    def evidence(project, r, *, on_step=None, **options):
        """A bundle from the arm's recorded log, as `evidence` writes it from a live stack."""
        assert fake.stacks.get(r.name) == "ready", "evidence of a stack that is not ready"
        on_step("gates 1/1: smoke")
        if r.name in failing:
            raise failing.pop(r.name)
        text = (DATA / ARM_LOGS[r.name]).read_text(encoding="utf-8")
        report = startup.parse_startup_log(text)
        return bundle.write_run(project, r, startup_log_text=text, startup_report=report)

    monkeypatch.setattr(capture, "capture_stack", evidence)
    fake.failing = failing  # type: ignore[attr-defined]
    return fake


def _campaign(tmp_path: Path, bracket: bool = True) -> tuple[Project, Path]:
    project = Project(make_project(tmp_path, {}, copy_shipped=True))
    opts = CampaignOptions(bracket=bracket, gate=True)
    return project, runner.create(project, CONTROL, CANDIDATE, opts, "ab")


def _arms(directory: Path) -> list[tuple[str, str, int]]:
    return [(a.key, a.status, a.attempts) for a in state.load(directory).arms]


def test_an_interrupted_arm_resumes_by_attaching_and_done_arms_are_not_run_again(tmp_path, fake):
    project, directory = _campaign(tmp_path)
    fake.fail[("up", CANDIDATE)] = KeyboardInterrupt()
    told = Told()
    with pytest.raises(Interrupted, match="interrupted during the candidate arm"):
        runner.run(project, directory, told)
    assert _arms(directory) == [
        ("control", "done", 1),
        ("candidate", "running", 1),
        ("bracket", "pending", 0),
    ]
    assert fake.stacks == {CANDIDATE: "loading"}  # its load goes on

    told = Told()
    st = runner.run(project, directory, told)
    assert [a.status for a in st.arms] == ["done"] * 3
    assert fake.calls == [
        ("up", CONTROL),
        ("down", CONTROL),
        ("up", CANDIDATE),  # interrupted
        ("attach", CANDIDATE),  # resumed: nothing loaded twice
        ("down", CANDIDATE),
        ("up", CONTROL),  # the bracket
        ("down", CONTROL),
    ]
    log = (directory / state.LOG).read_text(encoding="utf-8")
    assert "candidate: attaching (4096-131k is already starting)" in log
    assert told.lines[0] == "control (8192-131k): done at " + st.arms[0].finished_at + (
        "; not run again"
    )
    assert told.lines[1:4] == [
        "arm 2/3: candidate 4096-131k",
        "candidate ready (attached)",
        "gates 1/1: smoke",
    ]
    assert "arm 3/3: bracket 8192-131k" in told.lines
    assert len(set(map(id, told.sinks))) == 2  # each arm its own sink: no stage carries over
    assert [a.path for a in st.arms] == ["cold"] * 3
    assert st.bracket is not None and st.bracket.passed  # the same recorded log twice
    assert (directory / "campaign.md").is_file() and (directory / "comparison.json").is_file()


def test_a_failed_arm_keeps_its_error_and_its_redone_attempt_attaches(tmp_path, fake):
    project, directory = _campaign(tmp_path, bracket=False)
    fake.failing[CANDIDATE] = CheckFailed("4096-131k: gates failed: smoke")
    with pytest.raises(CheckFailed, match="gates failed"):
        runner.run(project, directory, Told())
    st = state.load(directory)
    assert (st.arms[1].status, st.arms[1].error) == ("failed", "4096-131k: gates failed: smoke")
    assert fake.stacks == {CANDIDATE: "ready"}  # left as it is for inspection
    assert not (directory / "candidate").exists()

    st = runner.run(project, directory, Told())
    assert _arms(directory) == [("control", "done", 1), ("candidate", "done", 2)]
    assert st.arms[1].error is None
    assert fake.calls[-2:] == [("attach", CANDIDATE), ("down", CANDIDATE)]


def test_an_arm_whose_bundle_is_in_only_needs_its_down(tmp_path, fake):
    project, directory = _campaign(tmp_path, bracket=False)
    fake.fail[("down", CANDIDATE)] = Interrupted("interrupted")
    with pytest.raises(Interrupted):
        runner.run(project, directory, Told())
    assert (directory / "candidate" / bundle.EVIDENCE).is_file()
    evidence = (directory / "candidate" / bundle.EVIDENCE).read_bytes()
    before = len(fake.calls)

    runner.run(project, directory, Told())
    assert fake.calls[before:] == [("down", CANDIDATE)]  # no second load, no second capture
    assert (directory / "candidate" / bundle.EVIDENCE).read_bytes() == evidence
    assert _arms(directory) == [("control", "done", 1), ("candidate", "done", 1)]


def test_an_engine_failure_fails_the_arm_and_the_next_run_starts_it_again(tmp_path, fake):
    project, directory = _campaign(tmp_path, bracket=False)
    fake.fail[("up", CONTROL)] = EngineError("8192-131k: the engine exited (code 1)")
    with pytest.raises(EngineError):
        runner.run(project, directory, Told())
    assert _arms(directory) == [("control", "failed", 1), ("candidate", "pending", 0)]
    assert ("up", CANDIDATE) not in fake.calls  # one stack at a time: nothing after a failure


def test_on_standby_the_control_sleeps_through_the_candidate_and_the_bracket_wakes_it(
    tmp_path, fake
):
    project, directory = _campaign(tmp_path)
    with (project.root / "profiles" / f"{CONTROL}.yaml").open("a", encoding="utf-8") as f:
        f.write("standby: {level: 1}\n")  # the candidate extends it: both are standby stacks
    st = runner.run(project, directory, Told())
    assert fake.calls == [
        ("up", CONTROL),
        ("sleep", CONTROL),  # not down: kept asleep while the candidate runs
        ("up", CANDIDATE),
        ("down", CANDIDATE),
        ("wake", CONTROL),  # the bracket: a wake, not a second cold start
        ("down", CONTROL),
    ]
    assert [(a.key, a.path) for a in st.arms] == [
        ("control", "cold"),
        ("candidate", "cold"),
        ("bracket", "wake"),
    ]
    assert st.arms[2].time_to_ready_s == 0.31
    assert st.bracket is not None and st.bracket.replay == "wake"
    md = (directory / "campaign.md").read_text(encoding="utf-8")
    assert "woke its engine from sleep (standby) instead of starting it again" in md
    assert "path per arm: control cold, candidate cold, bracket wake" in md


def test_both_kinds_of_arm_run_through_one_run_arm_and_only_the_driver_decides_to_attach():
    assert qualifyarm.run_arm is run_arm and runner.run_arm is run_arm  # one lifecycle
    catching = []
    for path in (REPO / "composegen").rglob("*.py"):
        if path.parent.name == "stack":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ExceptHandler) and "AlreadyRunning" in ast.unparse(
                node.type or ast.Constant(None)
            ):
                catching.append(str(path.relative_to(REPO)))
    assert catching == []  # was runner.py, qualifyarm.py and edge/switch.py


def test_an_arm_is_labelled_with_its_place_role_and_profile():
    arm = ArmState(key="candidate", profile=CANDIDATE)
    assert label(2, 3, arm) == "arm 2/3: candidate 4096-131k"


def _resident_pair(project: Project, serving: str, monkeypatch, fake: FakeDriver) -> None:
    """Both profiles on standby behind an edge whose alias serves SERVING; the memory plan fits
    them (its refusal is the engine tests'), the fake driver everywhere the campaign asks."""
    with (project.root / "profiles" / f"{CONTROL}.yaml").open("a", encoding="utf-8") as f:
        f.write("standby: {level: 1}\n")  # the candidate extends it: both are standby stacks
    (project.root / "edge.yaml").write_text(
        "name: edge-ab\nlisten: {bind: 127.0.0.1, port: 18443}\ntls: {mode: internal, names: "
        f"[localhost]}}\nstacks: [{CONTROL}, {CANDIDATE}]\naliases: {{ds4-flash: {serving}}}\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(resident, "driver", fake)
    monkeypatch.setattr(resident.standbyplan, "check_switch", lambda *args: None)


@pytest.mark.parametrize(
    ("serving", "calls", "awake"),
    [
        # the usual: the alias serves the control, which wakes again; the candidate sleeps
        (CONTROL, [("sleep", CANDIDATE), ("wake", CONTROL)], CONTROL),
        # the alias already served the candidate: it stays awake, the control asleep since its arm
        (CANDIDATE, [], CANDIDATE),
    ],
)
def test_without_bracket_on_standby_both_stay_resident_the_alias_s_engine_awake(
    tmp_path, fake, monkeypatch, serving, calls, awake
):
    project, directory = _campaign(tmp_path, bracket=False)
    _resident_pair(project, serving, monkeypatch, fake)
    st = runner.run(project, directory, Told())
    assert fake.calls == [("up", CONTROL), ("sleep", CONTROL), ("up", CANDIDATE), *calls]
    assert st.residency is not None and (st.residency.resident, st.residency.awake) == (True, awake)
    assert fake.stacks == {awake: "ready", ({CONTROL, CANDIDATE} - {awake}).pop(): "asleep"}
    log = (directory / state.LOG).read_text(encoding="utf-8")
    other = CANDIDATE if awake == CONTROL else CONTROL
    assert f"candidate: {other} asleep beside {awake} awake" in log, log
    md = (directory / "campaign.md").read_text(encoding="utf-8")
    assert "At the end both engines were resident" in md


def test_with_bracket_when_the_alias_serves_the_candidate_the_end_swaps_it_awake(
    tmp_path, fake, monkeypatch
):
    project, directory = _campaign(tmp_path)
    _resident_pair(project, CANDIDATE, monkeypatch, fake)
    st = runner.run(project, directory, Told())
    assert fake.calls == [
        ("up", CONTROL),
        ("sleep", CONTROL),
        ("up", CANDIDATE),
        ("sleep", CANDIDATE),  # the bracket wakes the control beside it
        ("wake", CONTROL),
        ("sleep", CONTROL),  # then the alias's engine is the one awake again
        ("wake", CANDIDATE),
    ]
    assert st.residency is not None and st.residency.awake == CANDIDATE
    log = (directory / state.LOG).read_text(encoding="utf-8")
    assert f"bracket: woke {CANDIDATE} in 0.31 s: an alias serves it" in log, log


def test_without_bracket_a_pair_that_cannot_stay_resident_is_taken_down_as_before(
    tmp_path, fake, monkeypatch
):
    project, directory = _campaign(tmp_path, bracket=False)
    _resident_pair(project, CONTROL, monkeypatch, fake)

    def refuse(*args):
        raise BadInput("GPU 0: 185.27 GiB > 95.01 GiB")

    monkeypatch.setattr(resident.standbyplan, "check_switch", refuse)
    st = runner.run(project, directory, Told())
    assert fake.calls == [("up", CONTROL), ("sleep", CONTROL), ("up", CANDIDATE),
                          ("down", CANDIDATE), ("down", CONTROL)]  # fmt: skip
    assert st.residency is not None and not st.residency.resident
    assert "the memory plan refuses" in st.residency.reason and fake.stacks == {}
