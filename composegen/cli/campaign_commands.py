"""`composegen campaign run|resume|decide|qualify|show`: parse, call composegen.campaign, print."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from composegen.campaign import decision, qualifyarm, runner, state
from composegen.cli.app import JsonOpt, ProfileArg, app, complete_profile
from composegen.cli.app import parse_ints as _ints
from composegen.cli.app import project as _project
from composegen.cli.bench_rates import campaign_rates as _rates
from composegen.cli.campaign_progress import ConsoleCampaign, print_end
from composegen.cli.optiongroups import flag, grouped, option
from composegen.errors import BadInput, CheckFailed, ComposegenError
from composegen.interrupts import deferred
from composegen.output import Output, emit_json
from composegen.stack import driver

if TYPE_CHECKING:  # annotations only: these modules load lazily (start-up time)
    from composegen.campaign.reports import CampaignOptions, CampaignState
    from composegen.project import Project

campaign_app = typer.Typer(
    help="Bracketed A/B campaigns and qualification arms, resumable, ending in a decision record.\n\n"
    "Example: composegen campaign run 8192-131k 4096-131k --bracket --gate  # in composegen's clone",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(campaign_app, name="campaign")


CampaignArg = typer.Argument(..., help="A campaign: its name (runs/campaigns/NAME) or its dir.")
EmulateArms = flag("--emulate", "Every arm on the emulated vLLM (a test double).")


def campaign_arms(project: Project, spec: str) -> list[str] | None:
    """The bundle directories of a campaign's finished arms (control, candidate, bracket; or
    primary, fallback), for `compare` and `report`; None when SPEC is not a campaign."""
    directory = state.find(project, spec)
    if directory is None:
        return None
    st = state.load(directory)
    arms = [str(directory / a.bundle) for a in st.arms if a.status == "done" and a.bundle]
    if len(arms) < (2 if st.kind == "ab" else 1):
        msg = f"{spec}: campaign {st.name} has {len(arms)} finished arm(s); `composegen campaign resume {st.name}`"
        raise BadInput(msg)
    return arms


def _drive(kind: str, project: Project, directory: Path, json_: bool) -> None:
    with deferred():
        driver.preload()
    ui = ConsoleCampaign(project, quiet=json_)
    try:
        st = (qualifyarm.run if kind == "qualify" else runner.run)(project, directory, ui)
    except ComposegenError as exc:
        st = state.load(directory)
        if not (st.finished and (directory / "campaign.md").is_file()):
            exc.hint = exc.hint or f"`composegen campaign resume {st.name}` continues it"
        elif not json_:  # a drifted bracket, a failed gate: the records are written and say so
            print_end(project, directory, st, "comparison.json")
        raise
    record = directory / (qualifyarm.RECORD_JSON if st.kind == "qualify" else "comparison.json")
    if json_:
        emit_json(json.loads(record.read_text(encoding="utf-8")))
    else:
        print_end(project, directory, st, record.name)
    if st.kind == "qualify" and not any(a.qualified for a in st.arms):
        raise CheckFailed(f"campaign {st.name}: no arm qualified")


@dataclasses.dataclass(frozen=True)
class Arms:
    """What every arm runs: the bracket, gates, ladder and bench of a campaign."""

    bracket: bool = flag("--bracket", "Run the control again last; check it reproduces.")
    gate: bool = flag("--gate", "Functional gates on every arm.")
    ladder: str | None = option(
        None, "--ladder", "A context ladder on every arm, e.g. 117500,118500."
    )
    bench: str | None = option(
        None, "--bench", "A load benchmark on every arm at these concurrencies."
    )
    bench_requests: int = option(8, "--bench-requests", "With --bench: requests per level.")
    bench_rates: str | None = option(
        None, "--bench-rates", "An open-loop bench on every arm at these request rates."
    )
    bench_input_tokens: int = option(256, "--bench-input-tokens", "With --bench*.")
    bench_output_tokens: int = option(64, "--bench-output-tokens", "With --bench*.")
    tools: int = option(20, "--tools", "With --gate: typed tools to exercise.")

    def options(self, tolerance: float | None, **more: Any) -> CampaignOptions:
        if self.bench_requests < 1 or self.tools < 1:
            raise BadInput("--bench-requests and --tools: at least 1")
        if tolerance is not None and not 0 <= tolerance < 1:
            raise BadInput(f"--bracket-tolerance: expected 0 ≤ t < 1, got {tolerance}")
        parsed = {
            "ladder": _ints(self.ladder, "--ladder") if self.ladder else [],
            "bench": _ints(self.bench, "--bench") if self.bench else [],
            "bench_rates": _rates(self.bench_rates, self.bench),
        }
        return state.options(**dataclasses.asdict(self) | parsed, tolerance=tolerance, **more)


@campaign_app.command("run")
@grouped
def run(
    *,
    control: str = ProfileArg,
    candidate: str = ProfileArg,
    arms: Arms,
    emulate: bool = EmulateArms,
    name: str | None = option(
        None, "--name", "The campaign's name (default CONTROL-vs-CANDIDATE)."
    ),
    tolerance: float | None = option(
        None,
        "--bracket-tolerance",
        "Relative bracket tolerance (default 0.01; exact when emulated).",
    ),
    next_arm: str | None = option(
        None, "--next", "The next arm the record names.", autocompletion=complete_profile
    ),
    next_fallback: str | None = option(
        None, "--next-fallback", "With --next: its fallback profile."
    ),
    json_: bool = JsonOpt,
) -> None:
    """Control, candidate (and with --bracket the control again), one stack at a time; then
    campaign.md.

    Example: composegen campaign run 8192-131k 4096-131k --bracket --gate --name ab  # in composegen's clone
    """
    opts = arms.options(tolerance, emulate=emulate, next_arm=next_arm, next_fallback=next_fallback)
    project = _project()
    _drive("ab", project, runner.create(project, control, candidate, opts, name), json_)


@campaign_app.command("resume")
def resume(campaign: str = CampaignArg, json_: bool = JsonOpt) -> None:
    """Continue a campaign: finished arms are never run again.

    Example: composegen campaign resume 8192-131k-vs-4096-131k  # after `campaign run`
    """
    project = _project()
    directory = state.require(project, campaign)
    _drive(state.load(directory).kind, project, directory, json_)


@campaign_app.command("qualify")
def qualify(
    primary: str = ProfileArg,
    fallback: str | None = option(
        None,
        "--fallback",
        "Judged by the same criteria when PRIMARY fails (default: its qualify.fallback).",
        autocompletion=complete_profile,
    ),
    emulate: bool = EmulateArms,
    name: str | None = option(None, "--name", "The campaign's name (default qualify-PRIMARY)."),
    json_: bool = JsonOpt,
) -> None:
    """A qualification arm and its fallback: start, KV pool, a long prompt, post-probe gates. Exit
    1: none qualified.

    Example: composegen campaign qualify 393k-gpu --fallback 393k-offload  # in composegen's clone
    """
    project = _project()
    _drive("qualify", project, qualifyarm.create(project, primary, fallback, emulate, name), json_)


@campaign_app.command("decide")
def decide(
    campaign: str = CampaignArg,
    promote: bool = flag("--promote", "Promote the candidate (or the arm that qualified)."),
    no_promotion: bool = flag("--no-promotion", "Promote nothing."),
    fallback: bool = flag("--fallback", "Fall back (to the control, or the fallback arm)."),
    why: str = option(..., "--why", "The operator's reason, recorded with the decision."),
    despite_gates: str | None = option(
        None, "--despite-gates", "With --promote: why, though the candidate failed gates."
    ),
    json_: bool = JsonOpt,
) -> None:
    """Record the operator's decision: decision.json, and the Decision of campaign.md and
    comparison.json.

    Example: composegen campaign decide 8192-131k-vs-4096-131k --no-promotion --why "not yet"  # after `campaign run`
    """
    chosen = [
        d for d, on in zip(decision.DECISIONS, (promote, no_promotion, fallback), strict=True) if on
    ]
    if len(chosen) != 1:
        raise BadInput("decide: give exactly one of --promote, --no-promotion, --fallback")
    record = decision.decide(_project(), campaign, chosen[0], why, despite_gates)
    promoted = record.profile or "no profile"
    said = f"campaign {record.campaign}: {record.decision} ({promoted}) at {record.decided_at}"
    said += f"\n  despite failed gates: {record.despite_gates}" if record.despite_gates else ""
    Output(json_).report(record, f"{said}\n  evidence sha256 {record.evidence_sha256}")


@campaign_app.command("show")
def show(campaign: str = CampaignArg, json_: bool = JsonOpt) -> None:
    """A campaign's record (campaign.md), or where it stands when unfinished; --json: its
    comparison.json.

    Example: composegen campaign show 8192-131k-vs-4096-131k  # after `campaign run`
    """
    project = _project()
    directory = state.require(project, campaign)
    st = state.load(directory)
    record = directory / (qualifyarm.RECORD_JSON if st.kind == "qualify" else "comparison.json")
    finished = record.is_file()
    Output(json_).report(
        json.loads(record.read_text(encoding="utf-8")) if finished else st,
        lambda: _standing(directory, st),
    )


def _standing(directory: Path, st: CampaignState) -> str:
    """campaign.md when written (else: not finished), then each arm's status."""
    page = directory / "campaign.md"
    lines = [
        page.read_text(encoding="utf-8").rstrip("\n")
        if page.is_file()
        else f"campaign {st.name} ({st.kind}): not finished"
    ]
    for arm in st.arms:
        extra = f" — {arm.error}" if arm.error else ""
        lines.append(f"  {arm.key:<10} {arm.profile:<24} {arm.status}{extra}")
    return "\n".join(lines)
