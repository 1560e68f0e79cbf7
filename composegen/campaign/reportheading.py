"""What `composegen report CAMPAIGN` opens with, read from the campaign's records: each finished arm's
role (control / candidate / bracket, or primary / fallback), the decision with its why, and the
Outcome sentences campaign.md opens with."""

from __future__ import annotations

from pathlib import Path

from composegen.campaign import decisionfile, record, state
from composegen.campaign.qualifyarm import RECORD_JSON
from composegen.campaign.reports import ComparisonReport, QualificationReport
from composegen.evidence.reportpage import CampaignHeading
from composegen.project import Project


def heading(project: Project, spec: str) -> CampaignHeading | None:
    """SPEC's heading when it names a campaign (None otherwise). The roles are those of the arms
    `report` reads, in the same order (campaign_arms: the finished arms with a bundle)."""
    directory = state.find(project, spec)
    if directory is None:
        return None
    st = state.load(directory)
    roles = [arm.key for arm in st.arms if arm.status == "done" and arm.bundle]
    decided = decisionfile.read(directory)
    return CampaignHeading(
        name=st.name,
        roles=list(roles),
        decision=decided.decision if decided else "undecided",
        profile=decided.profile if decided else None,
        why=_why(decided.why, decided.despite_gates) if decided else None,
        decided_at=decided.decided_at if decided else None,
        outcome=_outcome(directory, st.kind),
    )


def _outcome(directory: Path, kind: str) -> list[str]:
    """The record's Outcome: computed from comparison.json (an A/B), or each arm's verdict."""
    if kind == "ab":
        path = directory / "comparison.json"
        if not path.is_file():
            return []
        doc = ComparisonReport.model_validate_json(path.read_text(encoding="utf-8"))
        return [line for line in record.outcome(doc) if line.strip()]
    path = directory / RECORD_JSON
    if not path.is_file():
        return []
    qualified = QualificationReport.model_validate_json(path.read_text(encoding="utf-8"))
    return [
        f"{arm.arm} {arm.profile}: {'qualified' if arm.qualified else 'not qualified'}"
        for arm in qualified.arms
    ]


def _why(why: str | None, despite: str | None) -> str | None:
    return f"{why} (promoted despite failed gates: {despite})" if despite else why
