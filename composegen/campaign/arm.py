"""One arm's lifecycle, the same for an A/B arm (runner.py) and a qualification arm (qualifyarm.py):
exclusive check, its stack started (or an earlier attempt's attached to: the driver decides, see
driver.up_or_attach; or, on standby, woken), evidence, the bundle moved in whole, then the stack
taken down (or, on standby, put to sleep for the bracket to wake, or left resident for a promote:
campaign/resident.py). The state is saved after every
step, so a Ctrl-C, a crash or a failure leaves an arm `campaign resume` continues: a `done` arm is
never run again, a `running` one whose bundle is in only needs its down.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from composegen import privatestate
from composegen.campaign import exclusive, state
from composegen.campaign.progress import CampaignProgress
from composegen.campaign.reports import ArmState, CampaignState, Residency
from composegen.edge import asleep
from composegen.errors import ComposegenError, EngineError, Interrupted
from composegen.evidence import bundle
from composegen.profiles import resolve
from composegen.profiles.resolved import Resolved
from composegen.project import Project
from composegen.shm.reports import ShmScan
from composegen.stack import driver
from composegen.stack.reports import NodesShm

Step = Callable[[str], None]


@dataclass(frozen=True)
class ArmJob:
    """What differs between kinds of arm.

    evidence(r, started, step)  the bundle made (started False: the stack did not start)
    judge(arm, bundle_dir)      the arm's verdict set from its bundle; the outcome in words
    judge_no_start              a stack that does not start is judged on its own startup log
    sleep_after                 put to sleep after the evidence instead of down (the bracket wakes it)
    wake                        wake the stack an earlier arm put to sleep instead of starting it
    asleep                      profiles asleep for this campaign: exclusive mode lets them be
    resident                    asked at the close: resident, put to sleep (a promote switches to
                                it by sleep) or, with serving_stays, left awake when an alias serves
                                it; else down. Recorded in the state (residency)
    stay_awake                  left awake at the close (the control, serving its alias)
    settle                      run once the arm is closed, the last arm of a campaign on standby:
                                the other engine woken or taken down (campaign/resident.py); its
                                line goes to campaign.log. When the alias's engine cannot serve it
                                raises: the arm fails (exit 3), its bundle kept
    """

    evidence: Callable[[Resolved, bool, Step], Path]
    judge: Callable[[ArmState, Path], str]
    judge_no_start: bool = False
    sleep_after: bool = False
    wake: bool = False
    asleep: tuple[str, ...] = ()
    resident: Callable[[], Residency] | None = None
    serving_stays: bool = False
    stay_awake: bool = False
    settle: Callable[[CampaignState], str] | None = None


def run_arm(
    project: Project,
    directory: Path,
    st: CampaignState,
    arm: ArmState,
    ui: CampaignProgress,
    job: ArmJob,
) -> None:
    r = resolve.load(project, arm.profile)
    dest = directory / arm.key
    try:
        # else captured before an interrupt: only the down is left
        if not (dest / bundle.EVIDENCE).is_file():
            _begin(directory, st, arm)
            exclusive.check(r, job.asleep)
            started = _start(project, directory, st, arm, r, ui, job)
            made = job.evidence(r, started, ui.step)
            os.replace(made, dest)  # one rename: the bundle is in the campaign whole, or not at all
        arm.bundle = arm.key
        outcome = job.judge(arm, dest)
        state.save(directory, st)
        _close(project, directory, st, arm, r, job)
        ui.say(f"{arm.key} ({arm.profile}): {outcome}")
    except (Interrupted, KeyboardInterrupt) as exc:
        raise state.interrupted(directory, st, arm, exc) from None
    except ComposegenError as exc:
        state.failed(directory, st, arm, exc)
        raise


def _begin(directory: Path, st: CampaignState, arm: ArmState) -> None:
    arm.status, arm.error, arm.attempts = "running", None, arm.attempts + 1
    arm.started_at = privatestate.stamp()
    state.save(directory, st)
    state.log(directory, f"{arm.key}: up {arm.profile} (attempt {arm.attempts})")


def _start(
    project: Project,
    directory: Path,
    st: CampaignState,
    arm: ArmState,
    r: Resolved,
    ui: CampaignProgress,
    job: ArmJob,
) -> bool:
    """The arm's engine ready (True), or not started when the job judges that on the log (False)."""
    sink = ui.arm_started(st.arms.index(arm) + 1, len(st.arms), arm)
    if job.wake and driver.sleep_state(project, r, strict=True) is not None:
        ui.arm_ended()
        with asleep.held(project, r, True, st.options.emulate):  # the alias's mark, the journal
            seconds = driver.wake_stack(project, r)
        arm.path, arm.time_to_ready_s = "wake", round(seconds, 3)
        state.save(directory, st)
        state.log(directory, f"{arm.key}: woke {arm.profile} in {seconds:.2f} s (no cold start)")
        ui.arm_ready(arm, None, f"woken in {seconds:.2f} s (standby: no cold start)")
        return True
    try:
        report, attached = driver.up_or_attach(
            project, r, driver.UpOptions(emulate=st.options.emulate), sink
        )
    except EngineError as exc:
        if not job.judge_no_start:
            raise
        state.log(directory, f"{arm.key}: did not start: {exc.message}")
        ui.say(f"{arm.key} ({arm.profile}): did not start; judging its startup log")
        return False
    finally:
        ui.arm_ended()
    if attached:  # an earlier attempt's stack: its load went on, nothing was loaded twice
        state.log(directory, f"{arm.key}: attaching ({attached})")
    arm.path, arm.time_to_ready_s, arm.emulated = "cold", report.time_to_ready_s, report.emulated
    state.save(directory, st)
    state.log(directory, f"{arm.key}: ready in {report.time_to_ready_s} s; capturing evidence")
    ui.arm_ready(arm, report, "attached" if attached else "started")
    return True


def _close(
    project: Project, directory: Path, st: CampaignState, arm: ArmState, r: Resolved, job: ArmJob
) -> None:
    """Down (with the /dev/shm check), asleep for the bracket or a promote, or left awake; then
    the arm is done."""
    how = _how(directory, st, arm, job)
    if how == "sleep":
        state.log(directory, f"{arm.key}: evidence {arm.key}/; {arm.profile} to sleep")
        with asleep.held(project, r, False, st.options.emulate):
            driver.sleep_stack(project, r)
    elif how == "awake":
        state.log(directory, f"{arm.key}: evidence {arm.key}/; {arm.profile} left awake (resident)")
    else:
        state.log(directory, f"{arm.key}: evidence {arm.key}/; down {arm.profile}")
        down = driver.down(project, r)
        arm.shm_reclaimable = reclaimable(down.shm)
    if job.settle is not None:
        state.log(directory, f"{arm.key}: {job.settle(st)}")
    arm.status, arm.finished_at = "done", privatestate.stamp()
    state.save(directory, st)
    state.log(directory, f"{arm.key}: done (shm reclaimable: {arm.shm_reclaimable})")


def _how(directory: Path, st: CampaignState, arm: ArmState, job: ArmJob) -> str:
    """sleep, awake or down: what the arm's stack is left in."""
    if job.resident is not None:
        st.residency = job.resident()
        state.log(directory, f"{arm.key}: {st.residency.reason}")
        if not st.residency.resident:
            return "down"
        return "awake" if job.serving_stays and st.residency.awake == arm.profile else "sleep"
    if job.sleep_after:
        return "sleep"
    return "awake" if job.stay_awake else "down"


def reclaimable(shm: ShmScan | NodesShm | None) -> int | None:
    """Leftover /dev/shm files after down (the shm scan's `leftover` count: no holder, a known crash
    pattern); None when not checked (a private /dev/shm goes with its container)."""
    if shm is None:
        return None
    if isinstance(shm, ShmScan):
        return shm.totals.leftover.count
    # A multi-node stack: every node's scan (a local one) or probe (a remote one: names, no
    # holders).
    counts = [n.scan.totals.leftover.count for n in shm.nodes if n.scan is not None]
    counts += [
        sum(1 for e in n.probe.entries if e.pattern) for n in shm.nodes if n.probe is not None
    ]
    return sum(counts) if counts else None
