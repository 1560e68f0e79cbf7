"""Before arm 1 touches a running stack: every arm still to run has its profile rendered (the
campaign writes a stale or missing out/ itself, and says so), the engine answers, and each arm's
host port is free or held by that arm's own stack (which the arm attaches to or wakes); a stack
behind the edge publishes no port (its host port is the edge's door, which holds it). A problem
is CheckFailed naming each (the engine: EngineError), before anything was started or taken down.
"""

from __future__ import annotations

from composegen import ledger, render
from composegen.campaign.progress import CampaignProgress
from composegen.campaign.reports import CampaignState
from composegen.errors import CheckFailed, ComposegenError, EngineError
from composegen.profiles import resolve
from composegen.project import Project
from composegen.stack import driver


def check(project: Project, st: CampaignState, ui: CampaignProgress) -> None:
    names = list(dict.fromkeys(a.profile for a in st.arms if a.status not in ("done", "skipped")))
    if not names:
        return
    if changed := ledger.write(project, render.render_all(project, names)):
        ui.say(f"rendered {', '.join(changed)} (stale or missing)")
    try:
        driver.engine_info()
    except ComposegenError as exc:
        problems = [f"the engine: {exc.message}"]
    else:
        problems = [why for name in names if (why := _port(project, name))]
    if problems:
        kind = EngineError if problems[0].startswith("the engine") else CheckFailed
        raise kind(
            f"campaign {st.name} checked before its first arm and cannot start: {'; '.join(problems)}",
            hint=f"nothing was started or stopped; fix it, then `composegen campaign resume {st.name}`",
        )


def _port(project: Project, name: str) -> str | None:
    """Why NAME's host port cannot be bound; None when free, held by NAME's own stack, or NAME is
    behind the edge (it publishes no port: the edge's door listens there)."""
    r = resolve.load(project, name)
    if driver.deployment(project, r).behind_edge:
        return None
    if driver.project_containers(render.project_name(r)):
        return None
    return driver.loopback_conflict(
        r.profile.service.port.host, f"profiles/{name}.yaml service.port"
    )
