"""Evidence commands: gate, ladder, evidence, compare (plan: verdict_commands.py; qualify: qualify_command.py)."""

from __future__ import annotations

from collections.abc import Callable

import typer

from composegen.bench.reports import BenchResult
from composegen.bench.spec import BenchSpec
from composegen.cli.app import (
    JsonOpt,
    RunArg,
    StackArg,
    app,
    complete_gate_list,
)
from composegen.cli.app import load_profile as _load
from composegen.cli.app import parse_ints as _ints
from composegen.cli.app import project as _project
from composegen.cli.campaign_commands import campaign_arms
from composegen.cli.edge_commands import exposure_gate, exposure_matrix
from composegen.cli.evidence_options import BenchAsk, LogAsk
from composegen.cli.optiongroups import flag, grouped, option, profile_arg, run_arg
from composegen.edge import benchvia
from composegen.errors import BadInput as BadInputError
from composegen.errors import CheckFailed
from composegen.evidence import bundle as bundles
from composegen.evidence import capture, gates
from composegen.evidence import compare as comparing
from composegen.evidence import ladder as ladders
from composegen.evidence.bundle import load_run
from composegen.output import Output
from composegen.profiles.resolved import Resolved
from composegen.project import Project
from composegen.stack import driver


@app.command()
def gate(
    name: str = StackArg,
    tools: int = typer.Option(20, "--tools", help="Typed tools to exercise (N/N must pass)."),
    only: str | None = option(
        None,
        "--only",
        "Comma-separated gates: smoke,json,tools,stream_tools,continuation,responses.",
        autocompletion=complete_gate_list,
    ),
    exposure: bool = flag(
        "--exposure",
        "Instead: every startup route through the edge, without and with a key (composegen docs edge).",
    ),
    json_: bool = JsonOpt,
) -> None:
    """Functional gates against the running stack (official openai client). Exit 1 when any fails.

    Example: composegen gate starter --only smoke,json
    """

    project, r = _load(name)
    # "not running" is an engine failure (3), not a failed gate
    driver.running_container(project, r)
    if exposure:
        return exposure_gate(project, r, json_)
    result = capture.stack_gates(r, only=only, tools=tools)
    Output(json_).report(result, lambda: gates.format_text(result))
    if not result.ok:
        raise CheckFailed(f"{result.total - result.passed} of {result.total} gates failed")


@app.command()
def ladder(
    name: str = StackArg,
    targets: str = option(..., "--targets", "Prompt sizes in tokens, e.g. 117500,118500,119500."),
    max_tokens: int = option(
        64, "--max-tokens", "Tokens to generate per prompt (the decode rate's sample)."
    ),
    json_: bool = JsonOpt,
) -> None:
    """Context ladder: prompts sized with /tokenize; TTFT, prefill and decode rates.

    Example: composegen ladder starter --targets 8k,16k,30000
    """

    project, r = _load(name)
    driver.running_container(project, r)
    ep = driver.endpoint(r)
    result = ladders.run_ladder(
        ep.base_url,
        r.profile.model.served_name,
        _ints(targets),
        max_model_len=r.flag("max-model-len"),
        max_tokens=max_tokens,
        api_key=ep.api_key,
    )
    Output(json_).report(result, lambda: ladders.format_text(result))
    if not result.ok:
        raise CheckFailed("a ladder target failed")


@app.command()
@grouped
def evidence(
    *,
    name: str | None = profile_arg("A running stack's profile."),
    gate_: bool = typer.Option(False, "--gate", help="Also run the gates."),
    ladder_: str | None = option(None, "--ladder", "Also run a ladder at these targets."),
    tools: int = typer.Option(20, "--tools", help="With --gate: typed tools to exercise."),
    bench: BenchAsk,
    log: LogAsk,
    exposure: bool = flag("--exposure", "Also the edge's exposure matrix (exposure.json)."),
    json_: bool = JsonOpt,
) -> None:
    """Write runs/<utc-time>-<name>/ (evidence.json + raw files with sha256); print its path and
    what it holds.

    Example: composegen evidence starter --gate --ladder 8k,16k
    """

    project = _project()
    if log.path is not None:
        if not log.profile:
            raise BadInputError("--from-log needs --profile NAME")
        path = bundles.from_log(project, log.profile, log.path, force=log.force)
    else:
        if not name:
            raise BadInputError("give a profile name, or --from-log FILE --profile NAME")
        r = _load(name)[1]
        spec = bench.spec()
        path = capture.capture_stack(
            project,
            r,
            gate=gate_,
            ladder_targets=_ints(ladder_) if ladder_ else None,
            tools=tools,
            bench=spec,
            extra_raw={"exposure.json": exposure_matrix(project, r)} if exposure else None,
            bench_runner=_via_edge(project, r) if bench.via_edge else None,
        )
    run = load_run(path)
    # What the bundle recorded, read back as `compare` and `plan` will see it, not only where it is.
    Output(json_).report(
        {"path": project.rel(path), "evidence": run.as_read()},
        lambda: bundles.format_text(run, project.rel(path)).rstrip("\n"),
    )


def _via_edge(project: Project, r: Resolved) -> Callable[[BenchSpec], BenchResult]:
    return lambda spec: benchvia.bench_via_edge(project, r, spec.levels, spec)


@app.command()
def compare(
    run_a: str = RunArg,
    run_b: str | None = run_arg("A run (as RUN_A); omitted when RUN_A is a campaign."),
    markdown: bool = typer.Option(False, "--markdown", help="The Results table as Markdown."),
    threshold: float = option(
        0.10, "--threshold", "Flag when KV token and byte changes disagree by more than this."
    ),
    force: bool = flag("--force", "Compare runs of different models or max_model_len anyway."),
    json_: bool = JsonOpt,
) -> None:
    """The A/B Results table of two runs (or a campaign's control and candidate), config
    differences, and the unexplained-capacity flag. A profile name stands for its newest run (the
    note names it).

    Example: composegen compare 8192-131k 4096-131k --markdown  # in composegen's clone
    """

    project = _project()
    arms = campaign_arms(project, run_a) if run_b is None else None
    if arms is not None:
        run_a, run_b = arms[0], arms[1]
    elif run_b is None:
        raise BadInputError("compare: give two runs, or one campaign (runs/campaigns/NAME)")
    result = comparing.compare_runs(
        run_a, run_b, root=project.root, threshold=threshold, force=force
    )
    text = comparing.format_markdown if markdown else comparing.format_text
    Output(json_).report(result, lambda: text(result))
