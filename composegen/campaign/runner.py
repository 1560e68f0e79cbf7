"""`campaign run CONTROL CANDIDATE`: control, candidate and (with --bracket) the control again, one
stack at a time, each through arm.run_arm with the evidence `evidence` captures (gates, ladder,
bench as asked). A `done` arm is never run again (each is a real 10–30 minute load). Then the
bracket check, comparison.json and campaign.md.
"""

from __future__ import annotations

from pathlib import Path

from composegen import privatestate
from composegen.bench.spec import BenchSpec
from composegen.campaign import arm as run_arm
from composegen.campaign import bracket, comparison, decisionfile, precheck, record, resident, state
from composegen.campaign.progress import CampaignProgress
from composegen.campaign.reports import (
    ArmKey,
    ArmState,
    CampaignOptions,
    CampaignState,
    ComparisonReport,
    DecisionPart,
)
from composegen.errors import BadInput, CheckFailed
from composegen.evidence import bundle, capture, compare
from composegen.evidence.gatecheck import reference_answers
from composegen.evidence.reports.bundle import LoadedRun
from composegen.profiles import resolve
from composegen.profiles.resolved import Resolved
from composegen.project import Project

AB_ARMS: tuple[ArmKey, ...] = ("control", "candidate", "bracket")


def create(
    project: Project, control: str, candidate: str, opts: CampaignOptions, name: str | None
) -> Path:
    """The campaign directory: made new, or the existing one when its profiles and options are the
    same (so `campaign run` again resumes it)."""
    if control == candidate:
        raise BadInput(f"campaign run: control and candidate are the same profile ({control})")
    for n in (control, candidate, *([opts.next_arm] if opts.next_arm else [])):
        resolve.load(project, n)  # bad input before anything is written
    directory = state.campaign_dir(project, name or f"{control}-vs-{candidate}")
    if (directory / state.STATE).is_file():
        st = state.load(directory)
        if (st.kind, st.control, st.candidate, st.options) != ("ab", control, candidate, opts):
            raise BadInput(
                f"{project.rel(directory)}: campaign {st.name} exists with other profiles or options",
                hint=f"`composegen campaign resume {st.name}` continues it; --name NEW starts another",
            )
        return directory
    keys = AB_ARMS if opts.bracket else AB_ARMS[:2]
    arms = [ArmState(key=k, profile=candidate if k == "candidate" else control) for k in keys]
    said = f"created: control {control}, candidate {candidate}, arms {', '.join(keys)}"
    state.start(
        directory, said, kind="ab", control=control, candidate=candidate, options=opts, arms=arms
    )
    return directory


def run(project: Project, directory: Path, ui: CampaignProgress) -> CampaignState:
    st = state.load(directory)
    precheck.check(project, st, ui)
    for arm in st.arms:
        if arm.status in ("done", "skipped"):
            ui.say(f"{arm.key} ({arm.profile}): done at {arm.finished_at}; not run again")
            continue
        run_arm.run_arm(project, directory, st, arm, ui, _job(project, directory, st, arm))
    if st.kind == "ab":
        finish(project, directory, st)
    return st


def _job(project: Project, directory: Path, st: CampaignState, arm: ArmState) -> run_arm.ArmJob:
    """An A/B arm: the evidence `evidence` captures. On standby stacks the control sleeps while the
    candidate runs and a bracket wakes it (one cold start each); at the end the engine an alias
    serves stays awake and the other asleep when campaign/resident.py says they can."""
    opts = st.options
    bench = None
    if opts.bench_rates or opts.bench:  # rates: an open-loop arm (bench/rates.py)
        sizes = (opts.bench_input_tokens, opts.bench_output_tokens, opts.bench_requests)
        levels = () if opts.bench_rates else tuple(opts.bench)
        bench = BenchSpec(*sizes, levels=levels, rates=tuple(opts.bench_rates or ()))

    def evidence(r: Resolved, started: bool, step: run_arm.Step) -> Path:
        control = docs(directory, st).get("control") if arm.key != "control" else None
        return capture.capture_stack(
            project,
            r,
            gate=opts.gate,
            ladder_targets=opts.ladder or None,
            tools=opts.tools,
            bench=bench,
            on_step=step,
            # the equivalence gate: the control's answers, which the candidate and replay must give
            reference=reference_answers(control),
        )

    control, candidate = st.control or arm.profile, st.candidate or arm.profile
    standby = _on_standby(project, st, control, candidate)
    # the residency decided when the candidate's arm closed (campaign/resident.py)
    kept = st.residency is not None and st.residency.resident
    awake = st.residency.awake if st.residency is not None and kept else None
    asleep = (control, *([candidate] if kept else []))
    settles = (arm.key == "candidate" and not opts.bracket) or (arm.key == "bracket" and kept)
    return run_arm.ArmJob(
        evidence=evidence,
        judge=lambda a, dest: judged(bundle.load_run(dest)),
        # the control sleeps while the candidate runs; the bracket's replay sleeps again when the
        # alias serves the candidate (which then wakes)
        sleep_after=standby
        and (arm.key == "control" or (arm.key == "bracket" and awake == candidate)),
        wake=standby and arm.key == "bracket",
        asleep=asleep if standby and arm.key in ("candidate", "bracket") else (),
        resident=(
            (lambda: resident.decide(project, control, candidate, opts.emulate))
            if standby and arm.key == "candidate"
            else None
        ),
        serving_stays=not opts.bracket,
        stay_awake=kept and arm.key == "bracket" and awake == control,
        settle=(lambda s: resident.settle(project, s, arm.profile))
        if standby and settles
        else None,
    )


def _on_standby(project: Project, st: CampaignState, control: str, candidate: str) -> bool:
    """Whether the arms keep their engines resident: with --bracket when the control has
    `standby:` (its replay is a wake); without, when the pair can end resident (both on standby
    behind the edge, an alias serving one: campaign/resident.py), else each arm is taken down."""
    if st.options.bracket:
        return resolve.load(project, control).profile.standby is not None
    return resident.possible(project, control, candidate)[0] is None


def docs(directory: Path, st: CampaignState) -> dict[str, LoadedRun]:
    return {
        a.key: bundle.load_run(directory / a.bundle)
        for a in st.arms
        if a.status == "done" and a.bundle
    }


def finish(project: Project, directory: Path, st: CampaignState) -> None:
    """Bracket check, comparison.json and campaign.md; CheckFailed (exit 1) when the baseline
    drifted."""
    loaded = docs(directory, st)
    if "bracket" in loaded:
        st.bracket = bracket.check(
            loaded["control"], loaded["bracket"], tolerance=st.options.tolerance
        )
        replayed = next(a for a in st.arms if a.key == "bracket")
        st.bracket.replay = replayed.path or "cold"
        state.save(directory, st)
        state.log(directory, f"bracket: {'passed' if st.bracket.passed else 'DRIFTED'}")
    # once decided, the records stand as the decision hashed them
    if decisionfile.read(directory) is None:
        write_records(project, directory, st, loaded)
    if st.bracket is not None and not st.bracket.passed:
        raise CheckFailed(
            f"campaign {st.name}: the bracketed replay of {st.control} did not reproduce its baseline; "
            "the comparison is not trustworthy (campaign.md says which figures drifted)"
        )
    if lost := regressed_gates(loaded):
        raise CheckFailed(
            f"campaign {st.name}: the candidate {st.candidate} failed gates the control passed: "
            f"{', '.join(lost)} (campaign.md's Outcome names them)"
        )


def failed_gates(run: LoadedRun | None) -> list[str]:
    return [g.name for g in run.gates.gates if not g.passed] if run and run.gates else []


def regressed_gates(loaded: dict[str, LoadedRun]) -> list[str]:
    """The gates the candidate failed and the control passed."""
    control = loaded.get("control")
    passed = (
        {g.name for g in control.gates.gates if g.passed} if control and control.gates else set()
    )
    return [g for g in failed_gates(loaded.get("candidate")) if g in passed]


def judged(run: LoadedRun) -> str:
    """An arm's summary: done, and how its gates went (the failed ones by name)."""
    if run.gates is None:
        return "done"
    failed = failed_gates(run)
    said = f"done; gates {run.gates.passed}/{run.gates.total} passed"
    return said + (f"; FAILED: {', '.join(failed)}" if failed else "")


def write_records(
    project: Project,
    directory: Path,
    st: CampaignState,
    loaded: dict[str, LoadedRun] | None = None,
    decided: DecisionPart | None = None,
) -> ComparisonReport:
    """comparison.json and campaign.md; DECIDED: a decision being recorded (else decision.json's, if
    any)."""
    loaded = loaded if loaded is not None else docs(directory, st)
    compared = compare.compare_runs(
        directory / "control", directory / "candidate", root=project.root
    )
    report = comparison.build(
        st, directory, loaded, compared, decided or decisionfile.read(directory)
    )
    # comparison.json is written: JSON here
    privatestate.write_json(directory / "comparison.json", report.to_json())
    privatestate.write(directory / "campaign.md", record.render(report, st, next_arm(project, st)))
    return report


def next_arm(project: Project, st: CampaignState) -> list[str]:
    name = st.options.next_arm
    if not name:
        return ["None named (`campaign run … --next PROFILE [--next-fallback PROFILE]` names it)."]
    r = resolve.load(project, name)
    q, ctx = r.profile.qualify, r.flag("max-model-len")
    need = [f"start with a reported KV pool of at least {(q and q.min_kv_tokens) or ctx:,} tokens"]
    if q and q.min_prompt_tokens:
        need.append(f"process an actual prompt above {q.min_prompt_tokens - 1:,} tokens")
    need.append(
        "pass post-probe functional checks" + (f" ({', '.join(q.gates)})" if q and q.gates else "")
    )
    text = (
        f"{name}: {r.profile.description or 'the next arm'}. It must first "
        + ", then ".join(need)
        + "."
    )
    if st.options.next_fallback:
        text += f" If that fails, {st.options.next_fallback} is the fallback rather than the first variable."
    command = f"composegen campaign qualify {name}"
    command += f" --fallback {st.options.next_fallback}" if st.options.next_fallback else ""
    return [text, "", f"Run it: `{command}`."]
