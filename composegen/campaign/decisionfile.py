"""decision.json of a campaign, read (written by decision.py): the records show the decision once
made."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from composegen.campaign.reports import DecisionPart
from composegen.errors import BadInput

DECISION = "decision.json"
DECISIONS = ("promote", "no-promotion", "fallback")


def read(directory: Path) -> DecisionPart | None:
    """What the records show of decision.json (decision, profile, why, time); None: undecided."""
    path = directory / DECISION
    if not path.is_file() or path.is_symlink():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadInput(f"{path}:1: decision: unreadable ({type(exc).__name__})") from None
    if not isinstance(doc, dict) or doc.get("decision") not in DECISIONS:
        raise BadInput(f"{path}: decision: must be one of {', '.join(DECISIONS)}")
    try:
        return DecisionPart.model_validate(
            {k: doc.get(k) for k in ("decision", "profile", "why", "decided_at", "despite_gates")}
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        msg = f"{path}: {'.'.join(str(p) for p in first['loc'])}: {first['msg']}"
        raise BadInput(msg) from None
