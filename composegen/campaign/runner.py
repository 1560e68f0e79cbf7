"""`campaign run CONTROL CANDIDATE`: control, candidate and (with --bracket) the control again, one stack at
a time. Each arm: exclusive check, `up` (or, after an interrupted attempt, attach to the stack still
loading), wait, evidence (gates, ladder, bench as asked), the bundle moved into the campaign, `down` with
the /dev/shm check. The state is saved after every step; a `done` arm is never run again (each is a real
10–30 minute load). Then the bracket check, comparison.json and campaign.md.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from composegen.campaign import bracket, decisionfile, exclusive, files, state
from composegen.campaign.state import ArmKey, ArmState, CampaignOptions, CampaignState
from composegen.errors import BadInput, CheckFailed, ComposegenError, Interrupted
from composegen.evidence import bundle as evidence
from composegen.project import Project
from composegen.stack.progress import ProgressSink

Say = Callable[[str], None]
AB_ARMS: tuple[ArmKey, ...] = ("control", "candidate", "bracket")


def default_name(control: str, candidate: str) -> str:
    return f"{control}-vs-{candidate}"


def create(project: Project, control: str, candidate: str, opts: CampaignOptions, name: str | None) -> Path:
    """The campaign directory: made new, or the existing one when its profiles and options are the same
    (so `campaign run` again resumes it)."""
    from composegen.profiles import resolve as profile

    if control == candidate:
        raise BadInput(f"campaign run: control and candidate are the same profile ({control})")
    for n in (control, candidate, *([opts.next_arm] if opts.next_arm else [])):
        profile.load(project, n)  # bad input before anything is written
    directory = state.campaign_dir(project, name or default_name(control, candidate))
    if (directory / state.STATE).is_file():
        st = state.load(directory)
        if (st.kind, st.control, st.candidate, st.options) != ("ab", control, candidate, opts):
            raise BadInput(
                f"{project.rel(directory)}: campaign {st.name} exists with other profiles or options",
                hint=f"`composegen campaign resume {st.name}` continues it; --name NEW starts another",
            )
        return directory
    files.private_dir(directory)
    keys = AB_ARMS if opts.bracket else AB_ARMS[:2]
    now = files.now_iso()
    st = CampaignState(
        name=directory.name,
        kind="ab",
        control=control,
        candidate=candidate,
        options=opts,
        arms=[ArmState(key=k, profile=candidate if k == "candidate" else control) for k in keys],
        created_at=now,
        updated_at=now,
    )
    state.save(directory, st)
    state.log(directory, f"created: control {control}, candidate {candidate}, arms {', '.join(keys)}")
    return directory


def run(project: Project, directory: Path, sink: ProgressSink, say: Say) -> CampaignState:
    st = state.load(directory)
    for arm in st.arms:
        if arm.status in ("done", "skipped"):
            say(f"{arm.key} ({arm.profile}): done at {arm.finished_at}; not run again")
            continue
        run_arm(project, directory, st, arm, sink, say)
    if st.kind == "ab":
        finish(project, directory, st)
    return st


def run_arm(project: Project, directory: Path, st: CampaignState, arm: ArmState, sink: ProgressSink, say: Say) -> dict:
    """One arm up -> evidence -> down; returns its evidence (load_run)."""
    from composegen.profiles import resolve as profile
    from composegen.stack import driver
    from composegen.stack.loadstate import AlreadyRunning

    r = profile.load(project, arm.profile)
    opts = st.options
    dest = directory / arm.key
    try:
        if not (dest / evidence.EVIDENCE).is_file():  # else captured before an interrupt: only `down` is left
            arm.status, arm.error, arm.attempts = "running", None, arm.attempts + 1
            arm.started_at = files.now_iso()
            state.save(directory, st)
            state.log(directory, f"{arm.key}: up {arm.profile} (attempt {arm.attempts})")
            exclusive.check(r)
            say(f"{arm.key} ({arm.profile}): starting")
            try:
                report = driver.up(project, r, driver.UpOptions(emulate=opts.emulate), sink)
            except AlreadyRunning as exc:  # an earlier attempt's stack: its load goes on, nothing is reloaded
                state.log(directory, f"{arm.key}: attaching ({exc.message})")
                say(f"{arm.key} ({arm.profile}): {exc.message}; attaching")
                report = driver.attach(project, r, sink)
            arm.time_to_ready_s, arm.emulated = report.time_to_ready_s, report.emulated
            state.save(directory, st)
            state.log(directory, f"{arm.key}: ready in {report.time_to_ready_s} s; capturing evidence")
            bench = {"levels": opts.bench, "requests": opts.bench_requests} if opts.bench else None
            made = evidence.capture_stack(
                project, r, gate=opts.gate, ladder_targets=opts.ladder or None, tools=opts.tools, bench=bench
            )
            os.replace(made, dest)  # one rename: the bundle is in the campaign whole, or not at all
        arm.bundle = arm.key
        state.save(directory, st)
        state.log(directory, f"{arm.key}: evidence {arm.key}/; down {arm.profile}")
        down = driver.down(project, r)
        arm.shm_reclaimable = reclaimable(down.shm)
        arm.status, arm.finished_at = "done", files.now_iso()
        state.save(directory, st)
        state.log(directory, f"{arm.key}: done (shm reclaimable: {arm.shm_reclaimable})")
        say(f"{arm.key} ({arm.profile}): done")
    except (Interrupted, KeyboardInterrupt) as exc:
        raise state.interrupted(directory, st, arm, exc) from None
    except ComposegenError as exc:
        state.failed(directory, st, arm, exc)
        raise
    return evidence.load_run(dest)


def reclaimable(shm: dict | None) -> int | None:
    """Leftover /dev/shm files after down (the shm scan's `leftover` count: no holder, a known crash
    pattern); None when not checked (a private /dev/shm goes with its container)."""
    if not shm:
        return None
    totals = shm.get("totals") or {}
    if isinstance(totals.get("leftover"), dict):
        return int(totals["leftover"].get("count") or 0)
    nodes = shm.get("nodes")  # a multi-node stack: every node's scan (a local one) or probe (a remote one)
    if isinstance(nodes, list):
        counts = [reclaimable(n.get("scan")) for n in nodes if isinstance(n, dict)]
        counts += [
            sum(1 for e in n["probe"].get("entries") or [] if e.get("pattern") and not e.get("holders"))
            for n in nodes
            if isinstance(n, dict) and isinstance(n.get("probe"), dict)
        ]
        known = [c for c in counts if c is not None]
        return sum(known) if known else None
    return None


def docs(directory: Path, st: CampaignState) -> dict[str, dict]:
    return {a.key: evidence.load_run(directory / a.bundle) for a in st.arms if a.status == "done" and a.bundle}


def finish(project: Project, directory: Path, st: CampaignState) -> None:
    """Bracket check, comparison.json and campaign.md; CheckFailed (exit 1) when the baseline drifted."""
    loaded = docs(directory, st)
    if "bracket" in loaded:
        st.bracket = bracket.check(loaded["control"], loaded["bracket"], tolerance=st.options.tolerance)
        state.save(directory, st)
        state.log(directory, f"bracket: {'passed' if st.bracket['passed'] else 'DRIFTED'}")
    if decisionfile.read(directory) is None:  # once decided, the records stand as the decision hashed them
        write_records(project, directory, st, loaded)
    if st.bracket is not None and not st.bracket["passed"]:
        raise CheckFailed(
            f"campaign {st.name}: the bracketed replay of {st.control} did not reproduce its baseline; "
            "the comparison is not trustworthy (campaign.md says which figures drifted)"
        )


def write_records(
    project: Project, directory: Path, st: CampaignState, loaded: dict | None = None, decided: dict | None = None
) -> dict:
    """comparison.json and campaign.md; DECIDED: a decision being recorded (else decision.json's, if any)."""
    from composegen.campaign import comparison, record
    from composegen.evidence import compare

    loaded = loaded if loaded is not None else docs(directory, st)
    compared = compare.compare_runs(directory / "control", directory / "candidate", root=project.root)
    doc = comparison.build(st, directory, loaded, compared, decided or decisionfile.read(directory))
    files.write_json(directory / "comparison.json", doc)
    files.write_atomic(directory / "campaign.md", record.render(doc, st, next_arm(project, st)))
    return doc


def next_arm(project: Project, st: CampaignState) -> list[str]:
    from composegen.profiles import resolve as profile

    name = st.options.next_arm
    if not name:
        return ["None named (`campaign run … --next PROFILE [--next-fallback PROFILE]` names it)."]
    r = profile.load(project, name)
    q, ctx = r.profile.qualify, r.flag("max-model-len")
    need = [f"start with a reported KV pool of at least {(q and q.min_kv_tokens) or ctx:,} tokens"]
    if q and q.min_prompt_tokens:
        need.append(f"process an actual prompt above {q.min_prompt_tokens - 1:,} tokens")
    need.append("pass post-probe functional checks" + (f" ({', '.join(q.gates)})" if q and q.gates else ""))
    text = f"{name}: {r.profile.description or 'the next arm'}. It must first " + ", then ".join(need) + "."
    if st.options.next_fallback:
        text += f" If that fails, {st.options.next_fallback} is the fallback rather than the first variable."
    command = f"composegen campaign qualify {name}"
    command += f" --fallback {st.options.next_fallback}" if st.options.next_fallback else ""
    return [text, "", f"Run it: `{command}`."]
