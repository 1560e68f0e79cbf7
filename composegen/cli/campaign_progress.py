"""A campaign's progress on stderr, arm by arm (campaign.progress.CampaignProgress drawn).

Each arm's start gets its own ConsoleSink (the same display as `up`), so its stages, times and
"ready" are that arm's engine's, never the previous arm's. On a terminal a label line
(`arm 2/3: candidate 4096-131k`) stands above the live block; piped, every line of the arm (stage
changes, heartbeats) starts with the label. Then the summary `up` prints, and the evidence steps as
they begin. At the end: the Outcome, the `decide` command and the record's path.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import TextIO

from composegen.campaign import progress, runner, state
from composegen.campaign.reports import ArmState, CampaignState
from composegen.cli.console import ConsoleSink
from composegen.cli.readysummary import summary_text
from composegen.cli.stagelines import estimate
from composegen.output import err, out, terminal_width
from composegen.project import Project
from composegen.stack.progress import ProgressSink
from composegen.stack.reports import UpReport


class _Labelled:
    """A text stream whose every line starts with LABEL (piped output: which arm a line is of)."""

    def __init__(self, stream: TextIO, label: str) -> None:
        self.stream, self.label, self._fresh = stream, label, True

    def isatty(self) -> bool:
        return False

    def write(self, text: str) -> int:
        for piece in text.splitlines(keepends=True):
            self.stream.write((f"{self.label} " if self._fresh else "") + piece)
            self._fresh = piece.endswith("\n")
        return len(text)

    def flush(self) -> None:
        self.stream.flush()


class ConsoleCampaign(progress.CampaignProgress):
    def __init__(self, project: Project, quiet: bool = False, stream: TextIO | None = None):
        self.project, self.quiet = project, quiet
        self.stream = stream or sys.stderr
        self.label = ""
        self.sink: ConsoleSink | None = None

    def arm_started(self, index: int, total: int, arm: ArmState) -> ProgressSink:
        self.label = progress.label(index, total, arm)
        tty = self.stream.isatty()
        if not self.quiet and tty:
            self._line(self.label)
        shown = self.stream if tty else _Labelled(self.stream, f"{self.label} ·")
        self.sink = ConsoleSink(quiet=self.quiet, stream=shown, tty=tty)  # type: ignore[arg-type]
        estimate(self.sink.tracker, self.project, arm.profile)
        return self.sink

    def arm_ended(self) -> None:
        if self.sink is not None:
            self.sink.close()
            self.sink = None

    def arm_ready(self, arm: ArmState, report: UpReport | None, how: str) -> None:
        self.arm_ended()  # the live block stops before the summary and the evidence steps
        if report is None:
            return self._line(f"{self.label}: {arm.profile} {how}")
        width = terminal_width(self.stream)
        self._line(summary_text(report, width).rstrip("\n"))

    def step(self, text: str) -> None:
        self._line(f"{self.label} · {text}")

    def say(self, text: str) -> None:
        self._line(f"campaign: {text}")

    def _line(self, text: str) -> None:
        if not self.quiet:
            err(text)


def print_end(project: Project, directory: Path, st: CampaignState, record_name: str) -> None:
    """The Outcome, the `decide` command and where the whole record is (it is not printed: its
    SHA-256 table alone wraps into ~40 lines at 80 columns)."""
    width = terminal_width()
    out(f"campaign {st.name}: Outcome")
    for paragraph in progress.outcome(directory):
        body = textwrap.fill(paragraph, width - 2) if width else paragraph
        out(textwrap.indent(body, "  ") + "\n\n")  # a blank line after each paragraph
    if runner.failed_gates(runner.docs(directory, st).get("candidate")):
        out(f'decide: composegen campaign decide {st.name} --no-promotion --why "…"')
        out('        (the candidate failed gates: --promote needs --despite-gates "why")')
    else:
        out(f'decide: composegen campaign decide {st.name} --promote --why "…"')
        out("        (or --fallback, --no-promotion)")
    out(f"record: {project.rel(directory)}/campaign.md")
    out(f"        ({record_name}, {state.LOG}; `composegen campaign show {st.name}`)")
