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

from pathlib import Path
from typing import cast

from composegen import privatestate
from composegen.campaign import qualifyarm, runner, state
from composegen.campaign.decisionfile import DECISION, DECISIONS, read
from composegen.campaign.reports import CampaignState, Decision, DecisionPart, DecisionRecord
from composegen.errors import BadInput, CheckFailed
from composegen.evidence import gatecheck
from composegen.evidence.bundle import file_sha256
from composegen.project import Project
from composegen.report import JsonObject

MAX_WHY = 2000


def _profile(st: CampaignState, decision: str) -> str | None:
    if decision == "no-promotion":
        return None
    if st.kind == "qualify":
        winner = next((a.key for a in st.arms if a.qualified), "primary")
        key = "fallback" if decision == "fallback" else winner
        arm = next((a for a in st.arms if a.key == key), None)
        return arm.profile if arm else None
    return st.candidate if decision == "promote" else st.control


def _line(text: str, option: str) -> str:
    text = text.strip()
    if not text or len(text) > MAX_WHY or any(ord(c) < 32 and c not in "\t" for c in text):
        raise BadInput(f"{option}: one line of 1–{MAX_WHY} printable characters saying why")
    return text


def _undecided(project: Project, spec: str) -> tuple[Path, CampaignState]:
    """SPEC's directory and state: finished, and not decided yet."""
    directory = state.require(project, spec)
    st = state.load(directory)
    if not st.finished:
        pending = ", ".join(
            f"{a.key} ({a.status})" for a in st.arms if a.status not in ("done", "skipped")
        )
        msg = f"campaign {st.name} is not finished ({pending}); `composegen campaign resume {st.name}`"
        raise CheckFailed(msg)
    if read(directory) is not None:
        msg = f"{project.rel(directory / DECISION)}: campaign {st.name} is already decided (recorded once)"
        raise BadInput(msg)
    return directory, st


def _excused(directory: Path, st: CampaignState, despite: str | None) -> str | None:
    """A promote: the candidate's failed gates refused (CheckFailed), unless DESPITE says why
    (returned when there were failed gates to excuse)."""
    if st.kind != "ab":
        return None  # a qualification promotes the arm that qualified: its gates passed
    doc: JsonObject = privatestate.read_json(directory / "comparison.json", {})
    failed = gatecheck.record_failed_gates(doc, st.candidate or "")
    gatecheck.refuse_failed_gates(
        f"campaign {st.name}: the candidate {st.candidate}", failed, despite
    )
    return despite if failed else None


def decide(
    project: Project, spec: str, decision: str, why: str, despite_gates: str | None = None
) -> DecisionRecord:
    """DESPITE_GATES: the operator's why for promoting a candidate that failed gates (else such a
    promote is refused: CheckFailed naming them)."""
    if decision not in DECISIONS:
        msg = f"decide: give one of --promote, --no-promotion, --fallback (got {decision!r})"
        raise BadInput(msg)
    why = _line(why, "--why")
    despite = _line(despite_gates, "--despite-gates") if despite_gates is not None else None
    directory, st = _undecided(project, spec)
    chosen = cast(Decision, decision)  # one of DECISIONS, checked above
    part = DecisionPart(
        decision=chosen,
        profile=_profile(st, decision),
        why=why,
        decided_at=privatestate.stamp(),
        despite_gates=_excused(directory, st, despite) if chosen == "promote" else None,
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
        despite_gates=part.despite_gates,
    )
    record = record.model_copy(update={"seal": privatestate.seal(project, record.to_json())})
    privatestate.write_json(directory / DECISION, record.to_json())
    state.log(
        directory,
        f"decided: {decision} ({record.profile}); evidence sha256 {record.evidence_sha256}",
    )
    return record
