"""Gates decide (issue 50 item 1), on the seeded campaign whose candidate fails `tools` that the control
passed: the run is a failed check, the Outcome and each arm's summary name the failed gate, and neither
`campaign decide --promote` nor `promote` accepts the candidate unless the operator says why
(`--despite-gates`), which the decision, campaign.md and the report show."""

from __future__ import annotations

import json

import pytest

from composegen import privatestate
from composegen.campaign import decision, progress, reportheading, runner, state
from composegen.edge import evidence as edge_evidence
from composegen.errors import CheckFailed
from composegen.evidence import bundle
from composegen.profiles import resolve
from tests.support.campaigns import seeded_campaign
from tests.support.cli import run_cli


@pytest.fixture
def campaign(tmp_path):
    return seeded_campaign(tmp_path, plant_config=False)


def test_a_candidate_failing_a_gate_the_control_passed_fails_the_run(campaign):
    project, directory = campaign
    with pytest.raises(
        CheckFailed, match="the candidate 4096-131k failed gates the control passed: tools"
    ):
        runner.finish(project, directory, state.load(directory))
    outcome = " ".join(progress.outcome(directory))
    assert "Functional gates FAILED: candidate failed tools" in outcome
    assert "the candidate is not promoted on this evidence" in outcome
    assert (
        runner.judged(bundle.load_run(directory / "candidate"))
        == "done; gates 1/2 passed; FAILED: tools"
    )
    assert runner.judged(bundle.load_run(directory / "control")) == "done; gates 2/2 passed"


def test_decide_promote_refuses_failed_gates_unless_the_operator_says_why(campaign):
    project, directory = campaign
    with pytest.raises(CheckFailed, match="the candidate 4096-131k failed gates: tools") as refused:
        decision.decide(project, directory.name, "promote", "better KV")
    assert "--despite-gates" in (refused.value.hint or "")
    assert not (directory / "decision.json").exists()
    res = run_cli(
        "--root",
        str(project.root),
        "campaign",
        "decide",
        directory.name,
        "--promote",
        "--why",
        "better KV",
    )
    assert (
        res.returncode == 1
        and "failed gates: tools" in res.stderr
        and "Traceback" not in res.stderr
    )
    res = run_cli(
        "--root",
        str(project.root),
        "campaign",
        "decide",
        directory.name,
        "--promote",
        "--why",
        "better KV",
        "--despite-gates",
        "tools needs the parser of the next arm",
    )
    assert res.returncode == 0, res.stderr
    assert "despite failed gates: tools needs the parser of the next arm" in res.stdout
    on_disk = json.loads((directory / "decision.json").read_text())
    assert on_disk["despite_gates"] == "tools needs the parser of the next arm"
    assert "Despite failed gates: tools needs the parser" in (directory / "campaign.md").read_text()
    heading = reportheading.heading(project, directory.name)
    assert heading is not None and "promoted despite failed gates" in (heading.why or "")
    # promote accepts the decision that said why
    proof = edge_evidence.campaign_decision(
        project, directory.name, resolve.load(project, "4096-131k")
    )
    assert proof["kind"] == "campaign"


def test_promote_refuses_a_sealed_decision_that_ignores_failed_gates(campaign):
    project, directory = campaign
    record = decision.decide(project, directory.name, "promote", "better KV", despite_gates="x")
    forged = {**record.to_json(), "despite_gates": None}  # as a decision recorded before this check
    forged["seal"] = privatestate.seal(project, forged)
    privatestate.write_json(directory / "decision.json", forged)
    with pytest.raises(CheckFailed, match="4096-131k failed gates: tools"):
        edge_evidence.campaign_decision(project, directory.name, resolve.load(project, "4096-131k"))


def test_no_promotion_needs_no_reason_about_gates(campaign):
    project, directory = campaign
    record = decision.decide(project, directory.name, "no-promotion", "tools failed")
    assert record.despite_gates is None
