"""`campaign decide N --promote|--no-promotion|--fallback --why "…"`: the operator's call, recorded
once.

decision.json (0600, atomic) — the contract `composegen promote` reads:
  {"decision": "promote" | "no-promotion" | "fallback", "profile": the profile the decision promotes or null,
   "campaign": N, "why": "…", "decided_at": ISO-8601 UTC, "evidence_sha256": sha256 of comparison.json,
   "seal": the project's hmac over the other fields (privatestate.seal)}
The profile: promote -> the candidate (a qualification: the arm that qualified); fallback -> the control
(a qualification: its fallback arm); no-promotion -> null. comparison.json and campaign.md are written
with the decision first, so evidence_sha256 is the hash of the comparison.json that stays on disk.
A qualification campaign's sanitized record is qualification.json; its hash stands in the same field.
"""

from __future__ import annotations

from typing import cast

from composegen import privatestate
from composegen.campaign import qualifyarm, runner, state
from composegen.campaign.comparison import file_sha256
from composegen.campaign.decisionfile import DECISION, DECISIONS, read
from composegen.campaign.reports import CampaignState, Decision, DecisionPart, DecisionRecord
from composegen.errors import BadInput, CheckFailed
from composegen.project import Project

MAX_WHY = 2000


def _profile(st: CampaignState, decision: str) -> str | None:
    if decision == "no-promotion":
        return None
    if st.kind == "qualify":
        key = (
            "fallback"
            if decision == "fallback"
            else next((a.key for a in st.arms if a.qualified), "primary")
        )
        arm = next((a for a in st.arms if a.key == key), None)
        return arm.profile if arm else None
    return st.candidate if decision == "promote" else st.control


def decide(project: Project, spec: str, decision: str, why: str) -> DecisionRecord:
    if decision not in DECISIONS:
        raise BadInput(
            f"decide: give one of --promote, --no-promotion, --fallback (got {decision!r})"
        )
    why = why.strip()
    if not why or len(why) > MAX_WHY or any(ord(c) < 32 and c not in "\t" for c in why):
        raise BadInput(f"--why: one line of 1–{MAX_WHY} printable characters saying why")
    directory = state.require(project, spec)
    st = state.load(directory)
    if not st.finished:
        pending = ", ".join(
            f"{a.key} ({a.status})" for a in st.arms if a.status not in ("done", "skipped")
        )
        raise CheckFailed(
            f"campaign {st.name} is not finished ({pending}); `composegen campaign resume {st.name}`"
        )
    if read(directory) is not None:
        raise BadInput(
            f"{project.rel(directory / DECISION)}: campaign {st.name} is already decided (recorded once)"
        )
    chosen = cast(Decision, decision)  # one of DECISIONS, checked above
    part = DecisionPart(
        decision=chosen, profile=_profile(st, decision), why=why, decided_at=privatestate.stamp()
    )
    if st.kind == "ab":
        runner.write_records(project, directory, st, decided=part)
        evidence = directory / "comparison.json"
    else:
        qualifyarm.write_records(project, directory, st, decided=part)
        evidence = directory / qualifyarm.RECORD_JSON
    record = DecisionRecord(
        decision=chosen,
        profile=part.profile,
        campaign=st.name,
        why=why,
        decided_at=part.decided_at or "",
        evidence_sha256=file_sha256(evidence),
    )
    # composegen wrote it
    record = record.model_copy(update={"seal": privatestate.seal(project, record.to_json())})
    # decision.json is written: JSON here
    privatestate.write_json(directory / DECISION, record.to_json())
    state.log(
        directory,
        f"decided: {decision} ({record.profile}); evidence sha256 {record.evidence_sha256}",
    )
    return record
