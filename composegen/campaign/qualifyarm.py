"""`campaign qualify PRIMARY --fallback FALLBACK`: the qualification arm and its fallback, one stack
at a time.

Each arm: exclusive check, `up`; when it starts, `qualify` on the running stack (KV pool ≥ the
configured context, an actual prompt above the stated size sized with /tokenize, the ladder,
post-probe gates); when it does not start (vLLM refuses a KV pool below the context), its startup
log is judged by the same criteria (nothing is sent to an engine that is not ready). Either way the
evidence goes into the campaign, the stack is taken down, and when the arm did not qualify, the
fallback runs. qualification.json (sanitized: figures and criteria, raw artifacts by SHA-256) and
campaign.md say which arm qualified.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NoReturn

from composegen import privatestate
from composegen.campaign import arm as run_arm
from composegen.campaign import decisionfile, precheck, qualifyrecord, state
from composegen.campaign.comparison import raw_rows
from composegen.campaign.progress import CampaignProgress
from composegen.campaign.reports import (
    QUALIFICATION_SCHEMA,
    ArmCriterion,
    ArmState,
    CampaignState,
    DecisionPart,
    QualificationReport,
    QualifiedArm,
)
from composegen.campaign.sanitize import Scrubber
from composegen.edge import exposure
from composegen.errors import BadInput
from composegen.evidence import qualify
from composegen.evidence.bundle import load_run
from composegen.evidence.qualify import probe_target
from composegen.evidence.reports.bundle import LoadedRun
from composegen.evidence.reports.qualify import QualifyResult
from composegen.profiles import resolve
from composegen.profiles.resolved import Resolved
from composegen.project import Project
from composegen.stack import driver
from composegen.vllm import startup_rules
from composegen.vllm.startup import parse_startup_log

RECORD_JSON = "qualification.json"


def create(
    project: Project, primary: str, fallback: str | None, emulate: bool, name: str | None
) -> Path:
    r = resolve.load(project, primary)
    if fallback is None and r.profile.qualify and r.profile.qualify.fallback != primary:
        fallback = r.profile.qualify.fallback  # the profile's own `qualify: {fallback: …}`
    if fallback:
        resolve.load(project, fallback)
    if fallback == primary:
        raise BadInput(f"campaign qualify: --fallback is the primary profile itself ({primary})")
    directory = state.campaign_dir(project, name or f"qualify-{primary}")
    opts = state.options(emulate=emulate, next_fallback=fallback)
    if (directory / state.STATE).is_file():
        st = state.load(directory)
        if (st.kind, st.control, st.options) != ("qualify", primary, opts):
            msg = f"{project.rel(directory)}: campaign {st.name} exists with other profiles or options"
            raise BadInput(msg)
        return directory
    arms = [ArmState(key="primary", profile=primary)] + (
        [ArmState(key="fallback", profile=fallback)] if fallback else []
    )
    said = f"created: qualify {primary}" + (f", fallback {fallback}" if fallback else "")
    state.start(directory, said, kind="qualify", control=primary, options=opts, arms=arms)
    return directory


def run(project: Project, directory: Path, ui: CampaignProgress) -> CampaignState:
    st = state.load(directory)
    precheck.check(project, st, ui)
    for arm in st.arms:
        earlier = st.arms[: st.arms.index(arm)]
        if any(a.qualified for a in earlier) and arm.status != "done":
            arm.status = "skipped"
            state.save(directory, st)
            state.log(directory, f"{arm.key}: skipped ({earlier[-1].profile} qualified)")
            continue
        if arm.status in ("done", "skipped"):
            ui.say(f"{arm.key} ({arm.profile}): done at {arm.finished_at}; not run again")
            continue
        run_arm.run_arm(project, directory, st, arm, ui, _job(project, st))
    # once decided, the records stand as the decision hashed them
    if decisionfile.read(directory) is None:
        write_records(project, directory, st)
    return st


def _job(project: Project, st: CampaignState) -> run_arm.ArmJob:
    """A qualification arm: `qualify` on the running stack (an edge fronts it: its matrix too),
    or, when it does not start, its startup log judged by the same criteria."""

    def evidence(r: Resolved, started: bool, step: run_arm.Step) -> Path:
        if not started:
            return Path(_judge_log(project, r, st.options.emulate).run)
        exposed = exposure.gate_for(project, r)
        return Path(qualify.qualify_stack(project, r, exposed, on_step=step).run)

    return run_arm.ArmJob(evidence=evidence, judge=_verdict, judge_no_start=True)


def _verdict(arm: ArmState, dest: Path) -> str:
    verdict = json.loads((dest / "qualify.json").read_text(encoding="utf-8"))
    arm.qualified = bool(verdict["qualified"])
    failed = [c["name"] for c in verdict["criteria"] if not c["passed"]]
    arm.error = f"failed: {', '.join(failed)}" if failed else None
    return "QUALIFIED" if arm.qualified else f"not qualified ({arm.error})"


def _judge_log(project: Project, r: Resolved, emulate: bool) -> QualifyResult:
    """qualify on the startup log of a stack that did not start (no request is sent)."""
    ctr = driver.head_container(project, r)
    text = driver.container_log(ctr) if ctr is not None else ""
    report = driver.checked_startup(r, parse_startup_log(text))
    identity = driver.live_identity(ctr) if ctr is not None else None

    def not_sent(*args: object, **kwargs: object) -> NoReturn:
        raise AssertionError("qualify sends no request to an engine that is not ready")

    return qualify.qualify(
        project,
        r,
        startup_report=report,
        startup_log_text=text,
        container=identity,
        run_ladder_fn=not_sent,
        run_gates_fn=not_sent,
    )


def _arm_record(arm: ArmState, doc: LoadedRun) -> QualifiedArm:
    """DOC: the arm's evidence (load_run); its qualify.json read beside it."""
    verdict = json.loads((Path(doc.path) / "qualify.json").read_text(encoding="utf-8"))
    startup = doc.startup
    estimate = None
    for err in startup.errors:
        m = startup_rules.ESTIMATED_LEN.search(err.line or "")  # the parser's own pattern
        estimate = int(m.group(1).replace(",", "")) if m else estimate
    probe = None
    crit = {c["name"]: c for c in verdict["criteria"]}
    if "long_prompt" in crit:
        target = probe_target(crit["long_prompt"]["threshold"], startup.max_model_len or 0)
        rows = doc.ladder.targets if doc.ladder else []
        row = next((t for t in rows if t.target == target), None)
        probe = {"target": target} | {
            k: getattr(row, k) if row else None
            for k in ("prompt_tokens", "ttft_s", "prefill_tok_s", "decode_tok_s")
        }
    return QualifiedArm(
        arm=arm.key,
        profile=doc.profile.name,
        profile_hash=doc.profile.hash,
        emulated=doc.emulated,
        started=startup.ready,
        qualified=bool(verdict["qualified"]),
        max_model_len=startup.max_model_len,
        kv_cache_tokens=startup.kv_cache_tokens,
        kv_pool_estimate=estimate,
        probe=probe,
        criteria=[
            ArmCriterion(
                name=c["name"], measured=c["measured"], threshold=c["threshold"], passed=c["passed"]
            )
            for c in verdict["criteria"]
        ],
    )


def write_records(
    project: Project, directory: Path, st: CampaignState, decided: DecisionPart | None = None
) -> QualificationReport:
    arms: list[QualifiedArm] = []
    raw: list[dict[str, object]] = []
    for arm in st.arms:
        if arm.status != "done" or not arm.bundle:
            continue
        doc = load_run(directory / arm.bundle)
        arms.append(_arm_record(arm, doc))
        raw += raw_rows(arm.key, doc)
    winner = next((a for a in arms if a.qualified), None)
    chosen = decided or decisionfile.read(directory)
    written = {
        "schema": QUALIFICATION_SCHEMA,
        "campaign": st.name,
        "emulated": any(a.emulated for a in arms),
        "qualified_arm": winner.arm if winner else None,
        "qualified_profile": winner.profile if winner else None,
        # qualification.json is written: JSON from here on (for the scrub)
        "arms": [a.to_json() for a in arms],
        "decision": (chosen or DecisionPart(decision="undecided")).to_json(),
        "raw": raw,
    }
    scrub = Scrubber([str(directory.resolve()), str(project.root.resolve())])
    clean = scrub.json(written)
    clean["redacted"] = scrub.count
    report = QualificationReport.model_validate(clean)  # the sanitized record, checked
    privatestate.write_json(directory / RECORD_JSON, report.to_json())
    privatestate.write(directory / "campaign.md", qualifyrecord.render(report, st))
    return report
