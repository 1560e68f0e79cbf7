"""What a campaign tells a person while it runs, arm by arm. The campaign calls these; the CLI draws
them (the default does nothing: `--json`, tests).

Each arm gets a fresh ProgressSink for its own engine's start, so stages, times and "ready" never
carry over from the previous arm; the evidence steps (gates k/N, ladder target k/N) come as they run.
"""

from __future__ import annotations

from pathlib import Path

from composegen.campaign import record
from composegen.campaign.reports import ArmState
from composegen.stack.progress import ProgressSink
from composegen.stack.reports import UpReport


class CampaignProgress:
    """No-op by default; override what you show."""

    def arm_started(self, index: int, total: int, arm: ArmState) -> ProgressSink:
        """Arm INDEX of TOTAL (1-based) starts its stack: the sink for that start alone."""
        return ProgressSink()

    def arm_ready(self, arm: ArmState, report: UpReport | None, how: str) -> None:
        """The arm's engine answers (REPORT: `up`'s summary; None when it was woken, HOW says)."""

    def arm_ended(self) -> None:
        """The arm's start is over (ready, failed or interrupted): its sink is closed."""

    def step(self, text: str) -> None:
        """An evidence step begins: `gates 2/5: json`, `ladder target 1/3: 117,500 tokens`."""

    def say(self, text: str) -> None:
        """A line about the campaign itself (an arm done, skipped, not run again)."""


def label(index: int, total: int, arm: ArmState) -> str:
    """`arm 2/3: candidate 4096-131k`."""
    return f"arm {index}/{total}: {arm.key} {arm.profile}"


def outcome(directory: Path) -> list[str]:
    """The Outcome paragraphs of the campaign's record (campaign.md); [] before it is written."""
    md = directory / "campaign.md"
    return record.paragraphs(md.read_text(encoding="utf-8"), "Outcome") if md.is_file() else []
