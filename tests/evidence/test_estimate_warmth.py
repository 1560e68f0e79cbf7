"""`up`'s "ready in ≈ N min" estimate counts a warm start: it comes from the newest earlier start of
the same warmth, read from the bundles of three real vLLM 0.26.0 starts (tests/data/
real-0.26.0-h100-warmstart: two cold, then warm), and says which (docs/caches.md)."""

from __future__ import annotations

from datetime import UTC, datetime

from composegen.cli.stagelines import estimate_text
from composegen.evidence import bundle
from composegen.evidence.estimate import earlier_load, load_seconds
from composegen.profiles import resolve as profiles
from composegen.project import Project
from composegen.vllm import stages, startup
from tests.support.helpers import MINIMAL, REPO, make_project

STARTS = REPO / "tests/data/real-0.26.0-h100-warmstart"


def test_the_estimate_comes_from_an_earlier_start_of_the_same_warmth(tmp_path):
    root = make_project(tmp_path, {"tiny": MINIMAL})
    project = Project(root)
    r = profiles.load(project, "tiny")
    seconds = {}
    for hour, start in enumerate(("fresh", "kept", "first")):  # oldest first: kept is the warm one
        text = (STARTS / f"{start}.log").read_text()
        seconds[start] = load_seconds(text)
        report = startup.parse_startup_log(text)
        when = datetime(2026, 12, 6, hour, tzinfo=UTC)
        bundle.write_run(project, r, startup_log_text=text, startup_report=report, now=when)
    warm, cold = earlier_load(root, "tiny", True), earlier_load(root, "tiny", False)
    assert warm == seconds["kept"] < seconds["fresh"]
    assert cold == seconds["first"]  # the newest cold one
    assert earlier_load(root, "tiny") == cold  # either: the newest
    tracker = stages.StageTracker(started_at=0.0)
    tracker.estimate_s, tracker.estimate_of = warm, "a warm start"
    assert estimate_text(tracker, 1.0).endswith("min (estimate, a warm start)")
