"""runs/campaigns/N/: state.json (reports.CampaignState, loaded and saved here), one directory per
finished arm (its evidence bundle, moved in once complete), campaign.log, and the records
(campaign.md, comparison.json, decision.json).

The state is saved after every step. An arm is `pending`, `running` (started, maybe interrupted: the
next run attaches to its stack or starts it again), `done` (its bundle is in the campaign: never
redone), `failed` (its error is kept; `resume` tries it again) or `skipped` (a fallback not needed).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from composegen import privatestate
from composegen.campaign.reports import NAME_RE, ArmState, CampaignOptions, CampaignState
from composegen.errors import BadInput, ComposegenError, Interrupted
from composegen.project import Project

STATE = "state.json"
LOG = "campaign.log"
MAX_STATE_BYTES = 4 << 20

OPTION_NAMES = {
    "next_arm": "--next",
    "next_fallback": "--next-fallback/--fallback",
    "tolerance": "--bracket-tolerance",
}


def options(**values: Any) -> CampaignOptions:
    """CampaignOptions from command-line values; a bad one is BadInput naming the option."""
    try:
        return CampaignOptions.model_validate(values)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else "option"
        option = OPTION_NAMES.get(field, "--" + field.replace("_", "-"))
        raise BadInput(f"{option}: {first['msg']}") from None


def check_name(name: str) -> str:
    if not NAME_RE.fullmatch(name) or ".." in name:
        msg = f"--name: {name!r} is not a campaign name (lower-case letters, digits, '.', '-', '_')"
        raise BadInput(msg)
    return name


def campaign_dir(project: Project, name: str) -> Path:
    return project.inside(project.runs_dir, "campaigns", check_name(name))


def find(project: Project, spec: str) -> Path | None:
    """A campaign directory from a name (runs/campaigns/NAME) or a path to one; else None."""
    path = Path(spec)
    if path.is_dir() and (path / STATE).is_file():
        return path
    if NAME_RE.fullmatch(spec) and ".." not in spec:
        under = project.runs_dir / "campaigns" / spec
        if (under / STATE).is_file():
            return under
    return None


def require(project: Project, spec: str) -> Path:
    found = find(project, spec)
    if found is None:
        raise BadInput(f"{spec}: campaign: no such campaign (runs/campaigns/{spec}/state.json)")
    return found


def load(directory: Path) -> CampaignState:
    path = directory / STATE
    if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_STATE_BYTES:
        raise BadInput(f"{path}: campaign state: missing, a link, or too large")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        return CampaignState.model_validate(doc)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        first = exc.errors()[0] if isinstance(exc, ValidationError) else None
        where = ".".join(str(p) for p in first["loc"]) if first else "state"
        why = first["msg"] if first else type(exc).__name__
        raise BadInput(f"{path}: {where}: {why} (the campaign state is damaged)") from None


def save(directory: Path, state: CampaignState) -> None:
    state.updated_at = privatestate.stamp()
    privatestate.write_json(directory / STATE, state.to_json())


def start(directory: Path, said: str, **fields: Any) -> None:
    """A new campaign: its private directory, its first state and the first line of its log."""
    privatestate.private_dir(directory)
    now = privatestate.stamp()
    save(directory, CampaignState(name=directory.name, created_at=now, updated_at=now, **fields))
    log(directory, said)


def log(directory: Path, message: str) -> None:
    privatestate.append_line(directory / LOG, message)


def interrupted(
    directory: Path, st: CampaignState, arm: ArmState, exc: BaseException
) -> Interrupted:
    """Ctrl-C during an arm: logged and saved for `campaign resume`; the error to raise."""
    log(directory, f"{arm.key}: interrupted; `composegen campaign resume {st.name}` continues")
    save(directory, st)
    what = f": {exc.message}" if isinstance(exc, Interrupted) else ""
    return Interrupted(
        f"campaign {st.name}: interrupted during the {arm.key} arm ({arm.profile}){what}",
        hint=f"`composegen campaign resume {st.name}` continues; finished arms are not run again",
    )


def failed(directory: Path, st: CampaignState, arm: ArmState, exc: ComposegenError) -> None:
    """A failed arm: its error recorded on it, saved and logged (the caller re-raises)."""
    arm.status, arm.error = "failed", exc.message
    save(directory, st)
    log(directory, f"{arm.key}: failed: {exc.message}")
