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
from composegen.edge import asleep, config, routes, standbyplan
from composegen.errors import BadInput, ComposegenError, EngineError
from composegen.profiles import resolve
from composegen.profiles.resolved import Resolved
from composegen.project import Project
from composegen.stack import driver

WAKE_TRIES = 2  # a wake that fails once (a slow /wake_up, a transient refusal) often passes again


def decide(project: Project, control: str, candidate: str, emulated: bool) -> Residency:
    """Asked when the candidate's arm closes (candidate awake, control asleep)."""
    why_not, awake = possible(project, control, candidate)
    asleep = candidate if awake == control else control
    if why_not is None and awake is not None:
        try:  # AWAKE beside the other asleep: the plan's switch check
            standbyplan.check_switch(project, config.load(project), asleep, awake, emulated)
        except BadInput as exc:
            why_not = f"the memory plan refuses {awake} awake beside {asleep} asleep: {exc.message}"
    if why_not is not None or awake is None:
        return Residency(resident=False, reason=f"{candidate} taken down: {why_not}")
    return Residency(
        resident=True,
        awake=awake,
        reason=f"{asleep} asleep beside {awake} awake (the memory plan fits them; an alias serves "
        f"{awake}): `composegen promote {asleep} --alias ALIAS` switches by sleep",
    )


def possible(project: Project, control: str, candidate: str) -> tuple[str | None, str | None]:
    """(why the pair cannot stay resident, None) or (None, the one an alias serves): what needs
    no engine. Aliases serving both: not resident (one alias would point at a sleeping engine)."""
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
    awake = [n for n in (control, candidate) if n in served]
    if not awake:
        return f"no alias serves {control} or {candidate}: no promote to switch between them", None
    if len(awake) == 2:  # one of them would be left asleep behind its alias
        return f"aliases serve both {control} and {candidate}: both must stay awake", None
    return None, awake[0]


def settle(project: Project, st: CampaignState, closed: str) -> str:
    """After the last arm closed (CLOSED's stack left as _how decided): the other engine woken when
    the alias serves it (resident), or taken down (not resident). The line for campaign.log. The
    engine an alias serves must serve: a failed wake is tried again, then that stack is started
    cold; when that fails too, an EngineError (exit 3) says so (the alias keeps its assignment)."""
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
    failures: list[str] = []
    with asleep.held(project, r, True, st.options.emulate):  # the alias's mark, the journal
        for _ in range(WAKE_TRIES):
            try:
                seconds = driver.wake_stack(project, r)
            except ComposegenError as exc:
                failures.append(exc.message)
                continue
            return (
                f"woke {other} in {seconds:.2f} s: an alias serves it; {closed} asleep (resident)"
            )
        return _cold(project, st, res, r, closed, failures)


def _cold(
    project: Project,
    st: CampaignState,
    res: Residency,
    r: Resolved,
    closed: str,
    failures: list[str],
) -> str:
    """The alias's engine would not wake: down and up cold, so the alias serves again (CLOSED stays
    asleep). The residency says what happened; a cold start that fails is raised."""
    woke = f"waking {r.name} at the end failed {len(failures)} times ({failures[-1]})"
    try:
        driver.down(project, r)
        up = driver.up(project, r, driver.UpOptions(emulate=st.options.emulate))
    except ComposegenError as exc:
        res.resident, res.awake = False, None
        res.reason = (
            f"{woke} and starting it cold failed ({exc.message}): the alias that serves it has "
            f"no engine; {closed} is asleep"
        )
        raise EngineError(
            f"campaign end: {res.reason}",
            hint=f"`composegen down {r.name}` then `composegen up {r.name}` starts it again",
        ) from None
    res.reason = f"{woke}; started it cold in {up.time_to_ready_s} s, {closed} asleep beside it"
    return f"{woke}; started {r.name} cold in {up.time_to_ready_s} s: an alias serves it"
