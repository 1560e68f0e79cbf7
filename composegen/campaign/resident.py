"""At the end of a campaign on standby stacks behind an edge, both engines may stay resident in the
state a switch needs: the stack an alias serves awake (the control; or the candidate, when the alias
already served it), the other asleep at its profile's level. Then `promote CANDIDATE --alias A
--campaign N` (or a rollback) switches by sleep (seconds) instead of a cold start. Only when the
memory plan says the awake one fits beside the other asleep; otherwise the candidate is taken down
as before (and, without --bracket, the control too). Either way the record says why.

With --bracket the control's replay wakes it, and the end is settled when the bracket closes;
without, when the candidate's arm closes: the candidate sleeps and the control wakes again, or the
candidate stays awake when the alias serves it (the control asleep since its own arm).
"""

from __future__ import annotations

from composegen.campaign.reports import CampaignState, Residency
from composegen.edge import config, routes, standbyplan
from composegen.errors import BadInput, ComposegenError
from composegen.profiles import resolve
from composegen.project import Project
from composegen.stack import driver


def decide(project: Project, control: str, candidate: str, emulated: bool) -> Residency:
    """Asked when the candidate's arm closes (candidate awake, control asleep)."""
    why_not, awake = possible(project, control, candidate)
    if why_not is None and awake is not None:
        asleep = candidate if awake == control else control
        try:  # AWAKE beside the other asleep: the plan's switch check
            standbyplan.check_switch(project, config.load(project), asleep, awake, emulated)
        except BadInput as exc:
            why_not = f"the memory plan refuses {awake} awake beside {asleep} asleep: {exc.message}"
    if why_not is not None or awake is None:
        return Residency(resident=False, reason=f"{candidate} taken down: {why_not}")
    asleep = candidate if awake == control else control
    return Residency(
        resident=True,
        awake=awake,
        reason=f"{asleep} asleep beside {awake} awake (the memory plan fits them; an alias serves "
        f"{awake}): `composegen promote {asleep} --alias ALIAS` switches by sleep",
    )


def possible(project: Project, control: str, candidate: str) -> tuple[str | None, str | None]:
    """(why the pair cannot stay resident, None) or (None, the one an alias serves): what needs
    no engine. The control first when aliases serve both."""
    if not config.configured(project):
        return "no edge.yaml: standby stacks switch behind an edge", None
    edge = config.load(project)
    outside = [n for n in (control, candidate) if n not in edge.stacks]
    if outside:
        return f"{' and '.join(outside)} not behind the edge (edge.yaml's stacks)", None
    missing = [n for n in (control, candidate) if edge.stacks[n].profile.standby is None]
    if missing:
        return f"{' and '.join(missing)} without `standby:`", None
    served = set(routes.aliases(project, edge).values())
    awake = next((n for n in (control, candidate) if n in served), None)
    if awake is None:
        return f"no alias serves {control} or {candidate}: no promote to switch between them", None
    return None, awake


def settle(project: Project, st: CampaignState, closed: str) -> str:
    """After the last arm closed (CLOSED's stack left as _how decided): the other engine woken when
    the alias serves it (resident), or taken down (not resident). The line for campaign.log; a wake
    that fails is said there and in the residency, not raised: the evidence stands."""
    other = st.candidate if closed == st.control else st.control
    if other is None:
        return "nothing else to settle"
    r = resolve.load(project, other)
    res = st.residency
    if res is None or not res.resident:
        driver.down(project, r)
        return f"down {other} (not resident)"
    if res.awake != other:
        return f"{other} left asleep beside {closed} awake (resident)"
    try:
        seconds = driver.wake_stack(project, r)
    except ComposegenError as exc:
        res.resident, res.awake = False, None
        res.reason = (
            f"waking {other} at the end failed ({exc.message}): it is still asleep; `composegen "
            f"down {other}` and `composegen up {other}` start it again"
        )
        return f"waking {other} failed: {exc.message}"
    return f"woke {other} in {seconds:.2f} s: an alias serves it; {closed} asleep (resident)"
