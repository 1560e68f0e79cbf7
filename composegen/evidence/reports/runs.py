"""The `report` report's shape (composegen schema --report report); evidence/runreport.py fills
it."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from composegen.bench.reports import BenchResult
from composegen.evidence.reports.compare import CompareReport
from composegen.evidence.reports.ladder import LadderResult
from composegen.report import Report, described


class RawFile(Report):
    file: str
    sha256: str
    bytes: int | None = None


class RunSummary(Report):
    run: str = Field(description="the bundle directory")
    label: str = Field(description="a short name for plots and tables: the profile, made unique")
    profile: str
    hash: str
    source: str
    created_at: str
    composegen_version: str | None
    image_digest: str | None
    model_revision: str | None
    compose_sha256: str | None
    emulated: bool
    unknown: list[str]
    raw: list[RawFile]
    startup: dict[str, Any] = described("the startup figures the report uses (see STARTUP_KEYS)")
    gates: str | None = Field(description="passed/total, null when not run")
    failed_gates: list[str] = Field(default_factory=list, description="the gates that failed")
    ladder: LadderResult | None
    bench: BenchResult | None


class RunsReport(Report):
    """`composegen report --json`."""

    runs: list[RunSummary]
    comparisons: list[CompareReport] = described("compare_runs of each later run against the first")
