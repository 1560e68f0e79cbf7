"""What `promote` accepts as proof, read defensively (both are files someone else wrote):

- a campaign decision, runs/campaigns/<N>/decision.json = {"decision": "promote" | "no-promotion" |
  "fallback", "profile", "campaign", "why", "decided_at", "evidence_sha256", "seal"}: accepted when
  decision is "promote", profile is the one being promoted, the seal is this project's (composegen
  wrote the file: privatestate.seal), the campaign's comparison.json (or qualification.json) on disk
  has the hash the decision names, and the arm that ran the profile ran it at the hash it has now (a
  changed profile needs a new campaign, or `--force REASON`, recorded with the assignment);
- a qualify bundle (`composegen qualify NAME` → runs/<run>/ with qualify.json): its hashes verified
  (evidence.load_run), qualified, for this profile at its current hash, its verdict sealed by this
  project.

Either way the assignment records {"kind", "ref", "sha256"}: the sha256 of the file that decided.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from composegen import privatestate
from composegen.edge.routes import Proof
from composegen.errors import BadInput, CheckFailed
from composegen.evidence import bundle, gatecheck
from composegen.profiles.resolved import Resolved
from composegen.project import Project

MAX_DECISION_BYTES = 64 << 10
CAMPAIGN_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
DECISIONS = ("promote", "no-promotion", "fallback")


def _read_small(path: Path, what: str, limit: int) -> bytes:
    if path.is_symlink() or not path.is_file():
        raise BadInput(f"{path}: {what}: missing, or not a plain file")
    with open(path, "rb") as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise BadInput(f"{path}: {what}: larger than {limit >> 10} KiB")
    return data


CAMPAIGN_RECORDS = ("comparison.json", "qualification.json")  # an A/B campaign's, a qualification's


def campaign_decision(
    project: Project, campaign: str, r: Resolved, force: str | None = None
) -> Proof:
    profile = r.name
    if not CAMPAIGN_RE.fullmatch(campaign) or campaign in (".", ".."):
        raise BadInput(f"--campaign {campaign!r}: not a campaign name (one path component)")
    path = project.inside(project.runs_dir, "campaigns", campaign, "decision.json")
    data = _read_small(path, "campaign decision", MAX_DECISION_BYTES)
    rel = project.rel(path)
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        msg = f"{rel}:1: campaign decision: unreadable JSON ({type(exc).__name__})"
        raise BadInput(msg) from None
    if not isinstance(doc, dict):
        raise BadInput(f"{rel}:1: campaign decision: must be a JSON object")
    decision, chosen = doc.get("decision"), doc.get("profile")
    if decision not in DECISIONS:
        msg = f"{rel}: decision: expected one of {', '.join(DECISIONS)}, got {str(decision)[:40]!r}"
        raise BadInput(msg)
    if not isinstance(doc.get("evidence_sha256"), str) or not re.fullmatch(
        r"[0-9a-f]{64}", doc["evidence_sha256"]
    ):
        raise BadInput(f"{rel}: evidence_sha256: expected 64 lower-case hex digits")
    if str(doc.get("campaign")) != campaign:
        msg = f"{rel}: campaign: says {str(doc.get('campaign'))[:40]!r}, the directory is {campaign!r}"
        raise BadInput(msg)
    if decision != "promote":
        why = str(doc.get("why") or "")[:200]
        msg = f"campaign {campaign} decided {decision!r}, not promote{f' ({why})' if why else ''}"
        raise CheckFailed(msg)
    if chosen != profile:
        raise CheckFailed(f"campaign {campaign} promotes {str(chosen)[:64]!r}, not {profile}")
    if not privatestate.sealed(project, doc):
        hint = f"`composegen campaign decide {campaign} --promote --why …` records one"
        why = f"{rel}: not a decision composegen recorded in this project (its seal does not match)"
        raise CheckFailed(why, hint=hint)
    ran = _ran_hash(project, path.parent, doc["evidence_sha256"], profile, doc.get("despite_gates"))
    proof = Proof(
        kind="campaign",
        ref=rel,
        sha256=hashlib.sha256(data).hexdigest(),
        campaign_evidence_sha256=doc["evidence_sha256"],
    )
    if ran != r.hash:
        if not force:
            raise CheckFailed(
                f"{profile}: the campaign ran it at profile hash {ran[:12]}, it is {r.hash[:12]} now",
                hint="a new campaign decides on the changed profile; or `--force REASON` (recorded)",
            )
        proof["forced"] = f"profile hash {ran[:12]} -> {r.hash[:12]}: {force}"[:300]
    return proof


def _ran_hash(
    project: Project, directory: Path, evidence_sha256: str, profile: str, despite: object
) -> str:
    """The profile hash PROFILE's arm ran at, from the campaign record the decision names by
    hash; CheckFailed when that arm failed gates and the decision did not say why despite them."""
    for name in CAMPAIGN_RECORDS:
        path = directory / name
        if not path.exists():
            continue
        data = _read_small(path, "campaign record", bundle.MAX_EVIDENCE_BYTES)
        rel = project.rel(path)
        if hashlib.sha256(data).hexdigest() != evidence_sha256:
            msg = f"{rel}: its sha256 is not the evidence_sha256 the decision names (changed since)"
            raise CheckFailed(msg)
        try:
            record = json.loads(data.decode("utf-8"))
            arms = record.get("arms")
        except (UnicodeDecodeError, ValueError, RecursionError, AttributeError):
            raise BadInput(f"{rel}: campaign record: unreadable JSON") from None
        failed = gatecheck.record_failed_gates(record, profile)
        gatecheck.refuse_failed_gates(f"{rel}: {profile}", failed, str(despite or ""))
        hashes = [
            a.get("profile_hash")
            for a in arms or []
            if isinstance(a, dict) and a.get("profile") == profile
        ]
        if not hashes or not all(isinstance(h, str) and h for h in hashes):
            raise CheckFailed(f"{rel}: no arm ran {profile} (or none recorded its profile hash)")
        return str(hashes[-1])
    msg = f"{project.rel(directory)}: the decision has no campaign record beside it ({' or '.join(CAMPAIGN_RECORDS)})"
    raise CheckFailed(msg)


def qualified_run(
    project: Project, r: Resolved, run: str | None, emulate: bool | None = None
) -> Proof:
    """The newest (or the given) run of R with a passing qualify.json, at R's current profile
    hash; with EMULATE, made by the same kind of engine (a real switch never rests on the
    emulator's proof, nor the reverse)."""
    candidates = [run] if run else _runs_of(project, r.name)
    if not candidates:
        raise CheckFailed(
            f"{r.name}: no qualify run to promote on",
            hint=f"`composegen qualify {r.name}` on the running stack, or pass --campaign N",
        )
    problems = []
    for spec in candidates:
        doc = bundle.load_run(spec, project.root)  # verifies every raw file's sha256
        where = Path(doc.path)
        verdict = where / "qualify.json"
        if not verdict.is_file():
            problems.append(f"{project.rel(where)}: no qualify.json")
            continue
        data = _read_small(verdict, "qualify verdict", bundle.MAX_EVIDENCE_BYTES)
        try:
            result = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            result = None
        if doc.profile.name != r.name or doc.profile.hash != r.hash:
            problems.append(f"{project.rel(where)}: for {doc.profile.name}@{doc.profile.hash}")
            continue
        if not isinstance(result, dict) or result.get("qualified") is not True:
            problems.append(f"{project.rel(where)}: not qualified")
            continue
        if emulate is not None and result.get("emulated", emulate) is not emulate:
            kinds = ("the EMULATED vLLM", "a real engine")
            made, wants = kinds[not result.get("emulated")], kinds[not emulate]
            problems.append(
                f"{project.rel(where)}: made by {made}, a switch to {wants} needs its proof"
            )
            continue
        # hashes can be recomputed by hand; the seal cannot
        if not privatestate.sealed(project, result):
            problems.append(
                f"{project.rel(where)}: qualify.json was not written by composegen in this project"
            )
            continue
        evidence = _read_small(where / bundle.EVIDENCE, "evidence", bundle.MAX_EVIDENCE_BYTES)
        return Proof(
            kind="qualify", ref=project.rel(where), sha256=hashlib.sha256(evidence).hexdigest()
        )
    msg = f"{r.name}: no passing qualification at hash {r.hash} ({'; '.join(problems[:3])})"
    raise CheckFailed(msg)


def _runs_of(project: Project, name: str) -> list[str]:
    if not project.runs_dir.is_dir():
        return []
    found = [
        p
        for p in project.runs_dir.glob(f"*-{name}*")
        if (p / "qualify.json").is_file() and not p.is_symlink()
    ]
    return [str(p) for p in sorted(found, reverse=True)]
