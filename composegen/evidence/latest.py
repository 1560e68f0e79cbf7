"""A profile name where a run is expected (`compare`, `plan --from`, `report`): that profile's
newest bundle."""

from __future__ import annotations

import json
import re
from pathlib import Path

from composegen.errors import BadInput

EVIDENCE = "evidence.json"


def latest_run(root: Path, name: str) -> Path:
    """The newest bundle of profile `name` under runs/ (named <UTC time>-<name>[-N]); BadInput when
    none."""
    own = re.compile(rf"^(\d{{8}}T\d{{6}}Z)-{re.escape(name)}(?:-(\d+))?$")
    found = []
    for path in (root / "runs").glob(f"*-{name}*"):
        m = own.match(path.name)
        if m and (path / EVIDENCE).is_file() and _profile_name(path / EVIDENCE) == name:
            found.append(((m.group(1), int(m.group(2) or 1)), path))
    if not found:
        raise BadInput(
            f"{name}: run: profile {name} has no run under runs/",
            hint=f"make one: `composegen evidence {name}` (a running stack) or "
            f"`composegen evidence --from-log FILE --profile {name}`" + _campaigns(root),
        )
    return max(found)[1]


def _campaigns(root: Path) -> str:
    """A campaign keeps its arms' runs under runs/campaigns/NAME/: name it instead of a profile."""
    names = sorted(p.parent.name for p in (root / "runs" / "campaigns").glob("*/state.json"))
    if not names:
        return ""
    return f"; a campaign's arms: `composegen report CAMPAIGN` (here: {', '.join(names[:5])})"


def _profile_name(doc_path: Path) -> str | None:
    """A bundle's profile name (the directory name alone is ambiguous: profiles `a` and `a-2`)."""
    try:
        return json.loads(doc_path.read_text(encoding="utf-8"))["profile"]["name"]
    # unreadable: never chosen; load_run explains if named
    except (OSError, ValueError, KeyError, TypeError):
        return None
