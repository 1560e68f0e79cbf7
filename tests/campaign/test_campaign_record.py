"""The records of a finished campaign (no engine): made from the seed's recorded r33 arm logs with private
topology planted in every raw file. campaign.md keeps the seed's numbers and shape; comparison.json is
schema-valid, traces every figure to a raw file's SHA-256, and leaks none of the planted strings."""

from __future__ import annotations

import getpass
import hashlib
import json
import socket
import stat

import jsonschema
import pytest

from composegen import privatestate
from composegen.campaign import decision, state
from composegen.edge import evidence as edge_evidence
from composegen.errors import BadInput, CheckFailed
from composegen.profiles import resolve
from tests.support.campaigns import PRIVATE, seeded_campaign
from tests.support.cli import run_cli


@pytest.fixture
def campaign(tmp_path, monkeypatch):
    # The machine the record is written on is the private one: its host and user names must not leak either.
    monkeypatch.setattr(socket, "gethostname", lambda: PRIVATE["host"])
    monkeypatch.setattr(getpass, "getuser", lambda: PRIVATE["user"])
    return seeded_campaign(tmp_path)


def _raw_text(directory) -> str:
    return "".join(p.read_text(encoding="utf-8") for arm in ("control", "candidate", "bracket")
                   for p in (directory / arm).iterdir())  # fmt: skip


def test_no_planted_private_string_leaves_the_machine(campaign):
    _, directory = campaign
    raw = _raw_text(directory)
    shared = (directory / "comparison.json").read_text() + (directory / "campaign.md").read_text()
    for kind, value in PRIVATE.items():
        assert value in raw, f"{kind} was not planted in the raw files"
        assert value not in shared, f"{kind} {value!r} leaked into the shared records"
    assert "10.20.30" not in shared and "lab.example" not in shared and "/home/" not in shared
    doc = json.loads((directory / "comparison.json").read_text())
    assert doc["redacted"] > 0  # the planted configuration values were scrubbed, not just absent
    env = {d["path"]: d["after"] for d in doc["differences"]["functional"]}
    assert env["services.vllm.environment.VLLM_HOST_IP"] == "<ip>"
    assert env["services.vllm.environment.CACHE_DIR"] == "~/hf-cache"


def test_comparison_json_is_schema_valid_and_hashes_every_raw_artifact(campaign):
    _, directory = campaign
    res = run_cli("schema", "--report", "comparison")
    assert res.returncode == 0, res.stderr
    doc = json.loads((directory / "comparison.json").read_text())
    jsonschema.validate(doc, json.loads(res.stdout))
    for entry in doc["raw"]:
        data = (directory / entry["arm"] / entry["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"] and len(data) == entry["bytes"]
    files = {(e["arm"], e["file"]) for e in doc["raw"]}
    for arm in ("control", "candidate", "bracket"):
        assert {
            (arm, f)
            for f in ("evidence.json", "startup.log", "startup.json", "gates.json", "ladder.json")
        } <= files
    # recorded, not emulated: 1%
    assert doc["bracket"]["passed"] is True and doc["bracket"]["exact"] is False
    mode = stat.S_IMODE((directory / "comparison.json").stat().st_mode)
    assert mode == 0o600


def test_campaign_md_keeps_the_seed_numbers_and_shape(tmp_path):
    _, directory = seeded_campaign(tmp_path, plant_config=False)
    md = (directory / "campaign.md").read_text()
    for heading in ("Outcome", "Controlled configuration", "Results", "What this proves and what it does not",
                    "Decision", "Next arm", "Evidence"):  # fmt: skip
        assert f"## {heading}" in md
    # The seed's Change column, reproduced from the recorded logs.
    assert "| Minimum-rank KV allocation | 15.27 GiB | 15.99 GiB | +0.72 GiB / +4.715% |" in md
    assert "| Engine-reported GPU KV tokens | 283,917 | 553,243 | +269,326 / +94.861% |" in md
    assert "| Peak activation per rank | 1.73 GiB | 1.14 GiB | -0.59 GiB / -34.104% |" in md
    assert (
        "Changing --max-num-batched-tokens from 8,192 to 4,096 on the otherwise matched 8192-131k control reduced "
        "profiled peak activation memory from 1.73 GiB to 1.14 GiB per TP rank and increased the minimum-rank GPU KV "
        "allocation from 15.27 GiB to 15.99 GiB."
    ) in md
    assert (
        "Only --max-num-batched-tokens changed functionally; it was the only functional change."
        in md
    )
    assert "A fresh bracketed replay reproduced the 8192-131k baseline" in md
    # Generated from what was measured: the ladder's top, one request per target, no bench.
    assert "a request above 118,503 tokens (the largest actual prompt both arms completed)" in md
    assert "a capacity comparison, not a performance ranking" in md
    assert "concurrency beyond one active request" in md
    assert "+4.715% KV bytes and +94.861% reported tokens is retained explicitly" in md
    assert "Decision: undecided" in md and "undecided. The operator records it" in md
    identity = next(
        line for line in md.splitlines() if "solely to preserve evidence identity" in line
    )
    assert all(word in identity.lower() for word in ("port", "served name", "container name"))
    # the planted failure
    assert "the functional gates did not all pass (control 2/2, candidate 1/2)" in md
    assert "that the candidate keeps the control's functional behaviour" in md
    # Every figure traces to a raw file by SHA-256.
    doc = json.loads((directory / "comparison.json").read_text())
    startup_sha = next(
        e["sha256"] for e in doc["raw"] if e == {**e, "arm": "control", "file": "startup.json"}
    )
    assert f"| Engine-reported GPU KV tokens | startup.json | `{startup_sha}` |" in md


def test_more_than_one_functional_change_is_said(campaign):
    _, directory = campaign
    md = (directory / "campaign.md").read_text()
    assert "The 4 functional changes from 8192-131k to 4096-131k" in md
    assert "4 settings changed functionally" in md and "does not isolate one variable" in md


def test_decide_writes_the_contract_and_the_record(campaign):
    project, directory = campaign
    with pytest.raises(BadInput):
        decision.decide(project, directory.name, "maybe", "x")
    with pytest.raises(BadInput):
        decision.decide(project, directory.name, "no-promotion", "  ")
    why = f"393K not qualified yet; operator on {PRIVATE['ipv4']}"
    record = decision.decide(project, directory.name, "no-promotion", why)
    on_disk = json.loads((directory / "decision.json").read_text())
    assert on_disk == record.to_json()
    assert set(on_disk) == {
        "decision",
        "profile",
        "campaign",
        "why",
        "decided_at",
        "evidence_sha256",
        "despite_gates",
        "seal",
    }
    assert privatestate.sealed(project, on_disk) and on_disk["seal"].startswith("hmac-sha256:")
    assert (
        record.decision == "no-promotion"
        and record.profile is None
        and record.campaign == "seed-ab"
    )
    assert record.why == why and record.decided_at.endswith("Z")
    comparison = directory / "comparison.json"
    assert record.evidence_sha256 == hashlib.sha256(comparison.read_bytes()).hexdigest()
    assert stat.S_IMODE((directory / "decision.json").stat().st_mode) == 0o600
    shared = json.loads(comparison.read_text())
    assert (
        shared["decision"]["decision"] == "no-promotion"
        and PRIVATE["ipv4"] not in comparison.read_text()
    )
    assert "**no-promotion**" in (directory / "campaign.md").read_text()
    with pytest.raises(BadInput, match="already decided"):
        decision.decide(project, directory.name, "promote", "again")


def test_promote_names_the_candidate_and_promote_accepts_the_decision(campaign):
    project, directory = campaign
    why = "the tools gate needs a parser the candidate gets next"
    chosen = decision.decide(project, directory.name, "promote", "better KV", despite_gates=why)
    assert chosen.profile == "4096-131k" and chosen.despite_gates == why
    proof = edge_evidence.campaign_decision(
        project, directory.name, resolve.load(project, "4096-131k")
    )
    assert proof["kind"] == "campaign" and "forced" not in proof
    assert proof["sha256"] == hashlib.sha256((directory / "decision.json").read_bytes()).hexdigest()


def test_a_drifted_bracket_fails_and_says_so(campaign):
    import shutil

    from composegen.campaign import bracket, runner
    from composegen.evidence import bundle as evidence
    from composegen.profiles import resolve as profile
    from composegen.vllm.reports import StartupCheck

    project, directory = campaign
    replay = evidence.load_run(directory / "bracket")
    # +2.1%: beyond the 1% tolerance
    drifted = {**replay.startup.model_dump(exclude_unset=True), "kv_cache_tokens": 290_000}
    r = profile.load(project, "8192-131k")
    made = evidence.write_run(
        project, r, startup_log_text=None, startup_report=StartupCheck.model_validate(drifted)
    )
    shutil.rmtree(directory / "bracket")
    made.rename(directory / "bracket")
    st = state.load(directory)
    with pytest.raises(CheckFailed, match="did not reproduce its baseline"):
        runner.finish(project, directory, st)
    md = (directory / "campaign.md").read_text()
    assert (
        "did NOT reproduce its baseline (Engine-reported GPU KV tokens differ by more than 1%)"
        in md
    )
    assert "| Engine-reported GPU KV tokens | 283917 | 290000 |" in md
    result = bracket.check(evidence.load_run(directory / "control"), replay, tolerance=0.0)
    assert result.passed is True and result.exact is True  # the same log: equal exactly


def test_compare_and_report_accept_a_campaign(campaign):
    project, directory = campaign
    res = run_cli("--root", str(project.root), "compare", directory.name, "--json")
    assert res.returncode == 0, res.stderr
    result = json.loads(res.stdout)
    assert (result["a"]["profile"], result["b"]["profile"]) == ("8192-131k", "4096-131k")
    res = run_cli("--root", str(project.root), "report", str(directory), "--json")
    assert res.returncode == 0, res.stderr
    assert [r["profile"] for r in json.loads(res.stdout)["runs"]] == [
        "8192-131k",
        "4096-131k",
        "8192-131k",
    ]


def test_a_damaged_state_is_bad_input(campaign):
    project, directory = campaign
    good = json.loads((directory / "state.json").read_text())
    # a hand-edited bundle path may not leave the campaign
    good["arms"][0]["bundle"] = "../../../etc"
    (directory / "state.json").write_text(json.dumps(good))
    res = run_cli("--root", str(project.root), "campaign", "show", directory.name)
    assert (
        res.returncode == 2
        and "state.json: arms.0.bundle" in res.stderr
        and "Traceback" not in res.stderr
    )
    (directory / "state.json").write_text('{"schema": "composegen.campaign/v1", "name": 3}')
    res = run_cli("--root", str(project.root), "campaign", "resume", directory.name)
    assert res.returncode == 2 and "state.json" in res.stderr and "Traceback" not in res.stderr
    res = run_cli(
        "--root", str(project.root), "campaign", "run", "8192-131k", "4096-131k", "--next", "../x"
    )
    assert res.returncode == 2 and res.stderr.startswith("composegen: --next:")
