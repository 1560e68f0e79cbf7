"""At the end of a bracketed campaign on standby stacks behind an edge, both engines may stay
resident in the state a switch needs: the control (the stack its alias serves) awake, the candidate
asleep at its profile's level. Then `promote CANDIDATE --alias A --campaign N` switches by sleep
(seconds) instead of a cold start. Only when the memory plan says the control wakes beside the
candidate asleep; otherwise the candidate is taken down as before. Either way the record says why.
"""

from __future__ import annotations

from composegen.campaign.reports import Residency
from composegen.edge import config, routes, standbyplan
from composegen.errors import BadInput
from composegen.project import Project


def decide(project: Project, control: str, candidate: str, emulated: bool) -> Residency:
    """Asked when the candidate's arm closes (candidate awake, control asleep)."""
    why_not = _why_not(project, control, candidate)
    if why_not is None:
        edge = config.load(project)
        try:  # the bracket wakes the control beside the candidate asleep: the plan's switch check
            standbyplan.check_switch(project, edge, candidate, control, emulated)
        except BadInput as exc:
            why_not = (
                f"the memory plan refuses {control} awake beside {candidate} asleep: {exc.message}"
            )
    if why_not is not None:
        return Residency(resident=False, reason=f"{candidate} taken down: {why_not}")
    return Residency(
        resident=True,
        reason=f"{candidate} asleep beside {control} awake (the memory plan fits them): "
        f"`composegen promote {candidate} --alias ALIAS --campaign NAME` switches by sleep",
    )


def _why_not(project: Project, control: str, candidate: str) -> str | None:
    if not config.configured(project):
        return "no edge.yaml: standby stacks switch behind an edge"
    edge = config.load(project)
    outside = [n for n in (control, candidate) if n not in edge.stacks]
    if outside:
        return f"{' and '.join(outside)} not behind the edge (edge.yaml's stacks)"
    missing = [n for n in (control, candidate) if edge.stacks[n].profile.standby is None]
    if missing:
        return f"{' and '.join(missing)} without `standby:`"
    if control not in routes.aliases(project, edge).values():
        return f"no alias serves {control}: a promote would not switch from it"
    return None
