"""`composegen qualify NAME`: the running stack against the profile's `qualify:` criteria; with
`--emulate`, a stack that is not up is started emulated for it; with `--alias`, NAME is qualified in
the place of the stack serving the alias (edge/proofarm.py)."""

from __future__ import annotations

from typing import Literal

from composegen.cli.app import JsonOpt, StackArg, app
from composegen.cli.app import load_profile as _load
from composegen.cli.optiongroups import option
from composegen.edge import proofarm, service
from composegen.edge.reports import ProofReport
from composegen.errors import BadInput, CheckFailed, EngineError
from composegen.evidence import qualify as qualifying
from composegen.output import Output

THEN = ("restore", "promote")


@app.command()
def qualify(
    name: str = StackArg,
    sleep_cycles: int = option(
        0,
        "--sleep-cycles",
        "Also N sleep/wake cycles of a standby profile (composegen docs standby).",
        min=0,
        max=1000,
    ),
    emulate: bool = option(
        False,
        "--emulate",
        "Start what is not up with the emulated vLLM (a test double), down again after.",
    ),
    alias: str | None = option(
        None,
        "--alias",
        "Qualify NAME in the place of the stack serving ALIAS (503 + stage meanwhile).",
    ),
    then: str = option(
        "restore",
        "--then",
        "With --alias: restore the serving stack, or promote NAME when it qualifies.",
    ),
    gates: str | None = option(
        None, "--gates", "With --alias: gates of a standby wake before qualifying (smoke)."
    ),
    json_: bool = JsonOpt,
) -> None:
    """Judge the stack against the profile's `qualify:` criteria; writes an evidence bundle.

    Example: composegen qualify 393k-gpu --json  # in composegen's clone
    """
    project, r = _load(name)
    if sleep_cycles and r.profile.standby is None:
        msg = f"--sleep-cycles: {name} has no `standby:` in its profile: no sleep mode to qualify"
        raise BadInput(msg)
    if then not in THEN:
        raise BadInput(f"--then: expected restore or promote, got {then!r}")
    show = Output(json_)
    if alias is None:
        if then != "restore":
            raise BadInput("--then promote needs --alias ALIAS (the alias to move)")
        if gates is not None:  # no wake here: the qualification's own gates judge the stack
            raise BadInput("--gates needs --alias ALIAS (the gates of the standby wake)")
        result = proofarm.qualify_here(project, r, emulate, sleep_cycles, show.note)
        show.report(result, lambda: qualifying.format_text(result))
        if qualifying.exit_code(result):
            raise CheckFailed(f"{name} is not qualified")
        return
    move: Literal["restore", "promote"] = "promote" if then == "promote" else "restore"
    use, edge = [g for g in (gates or "smoke").split(",") if g], service.load(project)
    report = proofarm.prove(
        project, edge, name, alias, then=move, emulate=emulate, sleep_cycles=sleep_cycles, gates=use
    )
    show.report(report, lambda: _proof_text(report))
    if report.restore_failed:  # the verdict and its bundle are shown above, --json too
        hint = f"`composegen status`, `composegen logs {report.serving_before}`"
        raise EngineError(report.restore_failed, hint=hint)
    if not report.qualified:
        raise CheckFailed(f"{name} is not qualified; {alias} serves {report.serving_after}")


def _proof_text(report: ProofReport) -> str:
    steps = ", ".join(f"{s.step} {s.seconds:.1f} s" for s in report.steps) or "none"
    moved = (
        f"{report.alias} now serves {report.profile} (promoted on this qualification)"
        if report.serving_after != report.serving_before
        else f"{report.alias} serves {report.serving_before} again"
    )
    return (
        qualifying.format_text(report.qualify)
        + f"{moved}; path: {report.path} ({report.path_reason}); {report.seconds:.1f} s\n"
        + f"  steps: {steps}\n"
    )
