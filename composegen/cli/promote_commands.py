"""`composegen promote PROFILE --alias A` and `composegen rollback A` (docs/edge.md; docs/commands.md
says why they stay top-level verbs). Their own module, apart from the `edge` group's: a switch's
clients wait from the command's start (issue 37: the alias moves within 2 s of it), so this imports
only what a switch needs (the exposure gate, the keys and recovery cost ~0.1 s more)."""

from __future__ import annotations

from collections.abc import Callable

import typer

from composegen.cli.app import JsonOpt, ProfileArg, app
from composegen.cli.app import project as _project
from composegen.cli.console import SwitchConsole
from composegen.cli.optiongroups import flag, option
from composegen.edge import service, standby, switch
from composegen.edge.reports import SwitchReport
from composegen.output import Output
from composegen.stack.progress import ProgressSink

EmulateOpt = flag("--emulate", "Start the stack emulated (composegen/emulator; tests, demos).")


GatesOpt = option("smoke", "--gates", "Gates the new stack must pass before the alias moves.")


def _switched(alias: str, json_: bool, move: Callable[[ProgressSink], SwitchReport]) -> None:
    """MOVE run under the switch's display (gone when it ends), then its report."""
    with SwitchConsole(alias, quiet=json_) as show:
        result = move(show)
    Output(json_).report(result, lambda: _switch_text(result))


def _switch_text(result: SwitchReport) -> str:
    if result.path == "unchanged":
        return f"{result.alias} already serves {result.profile}: nothing to switch"
    ev = result.evidence  # none: a rollback to edge.yaml's own assignment (--json: null)
    proof = f"\n  evidence: {ev['kind']} {ev['ref']} sha256 {ev['sha256'][:16]}…" if ev else ""
    told = [s.step for s in result.steps]  # `loading weights 1/4 … 4/4` one step (stages: each)
    reason = f" ({result.path_reason})" if result.path_reason else ""
    return (
        f"{result.alias}: {result.previous or 'nothing'} → {result.profile} "
        f"({result.by}, {result.seconds:.1f} s){proof}\n"
        f"  clients were told (503 + Retry-After): {' → '.join(told) or 'nothing'}\n"
        f"  path: {result.path}{reason}"
    )


@app.command()
def promote(
    profile: str = ProfileArg,
    alias: str = option(..., "--alias", "The stable model name clients send (edge.yaml aliases)."),
    campaign: str | None = option(
        None, "--campaign", "Accept runs/campaigns/N/decision.json as proof."
    ),
    run: str | None = option(
        None, "--run", "The qualify run to vouch for it (default: its newest)."
    ),
    force: str | None = option(
        None, "--force", "REASON: accept a campaign decision on a profile changed since (recorded)."
    ),
    emulate: bool = EmulateOpt,
    gates: str = GatesOpt,
    json_: bool = JsonOpt,
) -> None:
    """Point an alias at PROFILE after a passing qualification or a campaign decision: down the
    current stack, up the new one, gates, then the alias (503 + Retry-After + stage meanwhile; rolls
    back on failure). When both profiles have `standby:` and are resident, the switch is vLLM's sleep
    mode instead: the current one put to sleep, PROFILE woken, gates, in seconds (composegen docs standby).

    Example: composegen promote 4096-131k --alias ds4-flash  # in examples/team-edge
    """
    standby.preload_gates()  # the gates' client loads while the first steps wait (issue 48)
    project = _project()
    edge, only = service.load(project), [g for g in gates.split(",") if g]
    how = (campaign, run, force, emulate, only)
    _switched(alias, json_, lambda show: switch.promote(project, edge, profile, alias, *how, show))


@app.command()
def rollback(
    alias: str = typer.Argument(..., help="An alias of edge.yaml."),
    emulate: bool = EmulateOpt,
    gates: str = GatesOpt,
    json_: bool = JsonOpt,
) -> None:
    """Return an alias to the stack it pointed at before (the same switch as promote).

    Example: composegen rollback ds4-flash  # after `promote`, in examples/team-edge
    """
    standby.preload_gates()
    project = _project()
    edge, only = service.load(project), [g for g in gates.split(",") if g]
    _switched(alias, json_, lambda show: switch.rollback(project, edge, alias, emulate, only, show))
