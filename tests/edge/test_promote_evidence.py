"""What promote accepts as proof, read defensively: a campaign decision (the campaign helper's contract)
and a qualify bundle written by the real evidence writer."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from composegen import privatestate
from composegen.edge import evidence
from composegen.errors import BadInput, CheckFailed
from composegen.evidence import bundle
from composegen.profiles import resolve as profiles
from composegen.project import Project
from composegen.vllm.reports import StartupReport
from tests.support.cli import run_cli
from tests.support.edge import sealed_decision
from tests.support.engine import _SINGLE_REST, tiny_profile
from tests.support.helpers import make_project

CAND = tiny_profile("p-served", "{host: 39611}", rest=_SINGLE_REST.format(load=1, extra_env=""))


@pytest.fixture
def project(tmp_path) -> Project:
    return Project(make_project(tmp_path, {"cand": CAND, "other": CAND.replace("39611", "39612")}))


def decision(project: Project, name: str, doc) -> bytes:
    where = project.runs_dir / "campaigns" / name
    where.mkdir(parents=True)
    data = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    (where / "decision.json").write_bytes(data)
    return data


GOOD = {
    "decision": "promote",
    "profile": "cand",
    "campaign": "7",
    "why": "faster",
    "decided_at": "2026-12-01T21:00:00Z",
    "evidence_sha256": "c" * 64,
}


def test_a_promote_decision_for_this_profile_is_accepted_with_its_hash(project):
    data = sealed_decision(project, "7", "cand")
    proof = evidence.campaign_decision(project, "7", cand(project))
    record = hashlib.sha256(
        (project.runs_dir / "campaigns/7/comparison.json").read_bytes()
    ).hexdigest()
    assert proof == {"kind": "campaign", "ref": "runs/campaigns/7/decision.json",
                     "sha256": hashlib.sha256(data).hexdigest(), "campaign_evidence_sha256": record}  # fmt: skip


def cand(project: Project):
    return profiles.load(project, "cand")


def _rewrite(project: Project, name: str, change) -> dict:
    path = project.runs_dir / "campaigns" / "7" / name
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))
    return doc


def test_a_forged_decision_is_refused_whatever_it_recomputes(project, tmp_path):
    sealed_decision(project, "7", "cand")
    # every field plausible, no seal
    forged = _rewrite(project, "decision.json", lambda d: d.pop("seal"))
    with pytest.raises(CheckFailed, match="not a decision composegen recorded in this project"):
        evidence.campaign_decision(project, "7", cand(project))
    key = hashlib.sha256(b"guess").hexdigest()  # a seal made with any other key
    _rewrite(project, "decision.json", lambda d: d.update(seal=f"hmac-sha256:{key}"))
    with pytest.raises(CheckFailed, match="seal does not match"):
        evidence.campaign_decision(project, "7", cand(project))
    # sealed in another project, copied here
    other = Project(make_project(tmp_path / "other", {"cand": CAND}))
    _rewrite(project, "decision.json", lambda d: d.update(seal=privatestate.seal(other, forged)))
    with pytest.raises(CheckFailed, match="seal does not match"):
        evidence.campaign_decision(project, "7", cand(project))


def test_a_changed_campaign_record_or_profile_is_refused_or_forced_with_a_reason(project):
    sealed_decision(project, "7", "cand")
    comparison = project.runs_dir / "campaigns/7/comparison.json"
    kept = comparison.read_bytes()
    comparison.write_bytes(kept.replace(b'"arm"', b'"arm" ', 1))
    with pytest.raises(
        CheckFailed, match="its sha256 is not the evidence_sha256 the decision names"
    ):
        evidence.campaign_decision(project, "7", cand(project))
    comparison.unlink()
    with pytest.raises(CheckFailed, match="has no campaign record beside it"):
        evidence.campaign_decision(project, "7", cand(project))
    comparison.write_bytes(kept)
    path = project.profile_path("cand")
    path.write_text(path.read_text().replace("max-num-seqs: 1", "max-num-seqs: 2"))
    with pytest.raises(CheckFailed, match=r"the campaign ran it at profile hash .* it is .* now"):
        evidence.campaign_decision(project, "7", cand(project))
    proof = evidence.campaign_decision(
        project, "7", cand(project), force="seqs 2 is the same engine config"
    )
    assert proof["forced"].endswith(": seqs 2 is the same engine config")


@pytest.mark.parametrize(
    ("doc", "error", "message"),
    [
        (
            {**GOOD, "decision": "no-promotion"},
            CheckFailed,
            "decided 'no-promotion', not promote (faster)",
        ),
        ({**GOOD, "decision": "fallback"}, CheckFailed, "decided 'fallback'"),
        ({**GOOD, "profile": "other"}, CheckFailed, "promotes 'other', not cand"),
        ({**GOOD, "profile": None}, CheckFailed, "promotes 'None', not cand"),
        (
            {**GOOD, "decision": "yes"},
            BadInput,
            "decision: expected one of promote, no-promotion, fallback",
        ),
        ({**GOOD, "evidence_sha256": "xyz"}, BadInput, "evidence_sha256: expected 64"),
        ({**GOOD, "campaign": "8"}, BadInput, "campaign: says '8', the directory is '7'"),
        ([GOOD], BadInput, "must be a JSON object"),
        (b"{not json", BadInput, "unreadable JSON"),
        (b"\xff\xfe", BadInput, "unreadable JSON"),
        (b"[" * 100000, BadInput, "larger than 64 KiB"),
    ],
)
def test_a_decision_that_does_not_promote_this_profile_is_refused(project, doc, error, message):
    decision(project, "7", doc)
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        evidence.campaign_decision(project, "7", cand(project))


def test_campaign_names_and_links_cannot_leave_runs(project, tmp_path):
    for bad in ("../x", "a/b", ".", ""):
        with pytest.raises(BadInput):
            evidence.campaign_decision(project, bad, cand(project))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "decision.json").write_text(json.dumps(GOOD))
    (project.runs_dir / "campaigns").mkdir(parents=True)
    (project.runs_dir / "campaigns" / "7").symlink_to(elsewhere)
    with pytest.raises(BadInput, match="symbolic link"):
        evidence.campaign_decision(project, "7", cand(project))
    with pytest.raises(BadInput, match="missing"):
        evidence.campaign_decision(project, "9", cand(project))


def qualify_run(project: Project, name: str, qualified: bool, sealed: bool = True) -> str:
    """A bundle as `qualify` writes it (its verdict sealed with the project's key), or one made by hand."""
    r = profiles.load(project, name)
    verdict: dict = {"profile": name, "hash": r.hash, "qualified": qualified}
    if sealed:
        verdict["seal"] = privatestate.seal(project, verdict)
    path = bundle.write_run(
        project,
        r,
        startup_log_text="x\n",
        startup_report=StartupReport(ready=True),
        extra_raw={"qualify.json": verdict},
    )
    return str(path)


def test_a_passing_qualify_bundle_at_the_current_hash_is_accepted(project):
    r = profiles.load(project, "cand")
    with pytest.raises(CheckFailed, match="no qualify run"):
        evidence.qualified_run(project, r, None)
    qualify_run(project, "cand", qualified=False)
    with pytest.raises(CheckFailed, match="not qualified"):
        evidence.qualified_run(project, r, None)
    good = qualify_run(project, "cand", qualified=True)
    proof = evidence.qualified_run(project, r, None)
    assert proof["kind"] == "qualify" and proof["ref"] == project.rel(Path(good))
    assert (
        proof["sha256"]
        == hashlib.sha256((project.root / proof["ref"] / "evidence.json").read_bytes()).hexdigest()
    )
    other = qualify_run(project, "other", qualified=True)
    # another profile's qualification vouches for nothing here
    with pytest.raises(CheckFailed, match="for other@"):
        evidence.qualified_run(project, r, other)
    (project.root / proof["ref"] / "qualify.json").write_text('{"qualified": true, "tampered": 1}')
    with pytest.raises(CheckFailed):  # the bundle's own hashes catch an edited verdict
        evidence.qualified_run(project, r, good)


def test_a_qualify_bundle_made_by_hand_is_refused_whatever_its_hashes_say(project):
    r = profiles.load(project, "cand")
    forged = qualify_run(project, "cand", qualified=True, sealed=False)  # every hash in it is right
    with pytest.raises(
        CheckFailed, match=r"qualify\.json was not written by composegen in this project"
    ):
        evidence.qualified_run(project, r, forged)


def test_an_unreachable_engine_changes_nothing_and_its_password_is_never_shown(tmp_path):
    """A mistyped DOCKER_HOST (issue 39): promote checks the engine before it marks the alias 503, so nothing is
    published and nothing is stopped; the engine error reaches the operator with the URL's password masked."""
    root = make_project(
        tmp_path, {"old": CAND.replace("39611", "39621"), "new": CAND.replace("39611", "39622")}
    )
    pin = "example/caddy@sha256:" + "e" * 64
    (root / "edge.yaml").write_text(
        "listen: {bind: 127.0.0.1, port: 39620}\nstacks: [old, new]\naliases: {ds4-flash: old}\n"
        f'images: {{proxy: "{pin}", gate: "{pin}"}}\n'
    )
    assert run_cli("--root", str(root), "render").returncode == 0
    sealed_decision(Project(root), "7", "new")
    env = {"DOCKER_HOST": "tcp://admin:hunter22pw@127.0.0.9:1"}
    res = run_cli(
        "--root", str(root), "promote", "new", "--alias", "ds4-flash", "--campaign", "7", env=env
    )
    assert res.returncode == 3, (res.stdout, res.stderr)
    assert (
        "hunter22pw" not in res.stdout + res.stderr and "tcp://admin:***@127.0.0.9:1" in res.stderr
    )
    state = root / ".composegen/edge"
    # no 503 published
    assert not (state / "routes.json").exists() and not (state / "switch.json").exists()
