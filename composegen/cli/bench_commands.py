"""Load benchmark and report commands: bench, report."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import typer

from composegen import safewrite
from composegen.bench import closed as benching
from composegen.bench import stats, viaedgetext
from composegen.bench.reports import BenchResult
from composegen.bench.spec import BenchSpec
from composegen.campaign import reportheading
from composegen.cli.app import JsonOpt, StackArg, app
from composegen.cli.app import load_profile as _load
from composegen.cli.app import parse_ints as _ints
from composegen.cli.app import project as _project
from composegen.cli.bench_rates import OpenAsk, run_open
from composegen.cli.campaign_commands import campaign_arms
from composegen.cli.optiongroups import grouped, option, run_arg
from composegen.edge import benchvia
from composegen.errors import BadInput as BadInputError
from composegen.errors import CheckFailed
from composegen.evidence.reportpage import render_html, with_roles
from composegen.evidence.reportpng import render_png
from composegen.evidence.runreport import format_markdown, gather
from composegen.output import Output

# per level when neither --requests nor --duration is given (as evidence --bench-requests)
DEFAULT_REQUESTS = 32


@dataclass(frozen=True)
class Load:
    """What each request and level is: bench's sizing options."""

    concurrency: str = option("1,2,4,8", "--concurrency", "Concurrency levels, e.g. 1,2,4,8.")
    requests: int | None = option(
        None, "--requests", "Requests per level (default 32 without --duration)."
    )
    duration: float | None = option(
        None, "--duration", "Seconds per level (instead of --requests)."
    )
    input_tokens: int = option(
        ..., "--input-tokens", "Prompt tokens per request (sized with /tokenize)."
    )
    output_tokens: int = option(..., "--output-tokens", "max_tokens per request (ignore_eos).")
    seed: int | None = typer.Option(None, "--seed", help="Prompt seed (default: random, recorded).")
    goodput: str | None = option(
        None, "--goodput", "SLOs in ms for goodput, e.g. ttft:500,tpot:50."
    )

    def spec(self, burstiness: float, via_edge: bool) -> BenchSpec:
        none = self.requests is None and self.duration is None
        return BenchSpec(
            self.input_tokens,
            self.output_tokens,
            DEFAULT_REQUESTS if none else self.requests,
            self.duration,
            seed=self.seed,
            goodput=stats.parse_slos(self.goodput),
            burstiness=burstiness,
            via_edge=via_edge,
        )


@app.command()
@grouped
def bench(
    *,
    name: str = StackArg,
    load: Load,
    save_vllm: Path | None = option(
        None,
        "--save-vllm-results",
        "Also write vllm-bench-serve-cN.json per level here (vLLM's shape).",
    ),
    via_edge: bool = option(
        False,
        "--via-edge",
        "Through the edge's TLS listener with a throw-away key, alternated with the door: "
        "what the edge adds.",
    ),
    ask: OpenAsk,
    json_: bool = JsonOpt,
) -> None:
    """Closed-loop concurrency sweep over streamed chat completions (vllm bench serve's figures);
    with --request-rate, open-loop arrivals on vLLM's schedule instead.

    Example: composegen bench starter --concurrency 1,4,16 --input-tokens 1000 --output-tokens 128
    """
    spec = load.spec(ask.burstiness, via_edge)
    if ask.rates is not None or ask.find_max:
        if via_edge:
            raise BadInputError("--request-rate / --find-max: not with --via-edge (one path only)")
        return run_open(lambda: _load(name), ask, spec, save_vllm=save_vllm, json_=json_)
    spec = dataclasses.replace(spec, levels=tuple(_ints(load.concurrency, "--concurrency"))).check()
    if save_vllm is not None:
        if via_edge:
            raise BadInputError("--save-vllm-results: not with --via-edge (two paths, one shape)")
        benching.check_results_dir(save_vllm)
    project, r = _load(name)
    if via_edge:
        result = benchvia.bench_via_edge(project, r, spec.levels, spec)
        Output(json_).report(result, lambda: _via_edge_text(result))
        if not result.ok:
            raise CheckFailed("a bench level had errors or completed nothing on a path")
        return
    run = benching.bench_stack(project, r, spec.levels, spec)
    result = run.result
    saved = benching.save_vllm_results(run, save_vllm) if save_vllm is not None else []
    wrote = "".join(f"\nwrote {path} (vllm bench serve's result shape)" for path in saved)
    Output(json_).report(result, lambda: stats.format_text(result).rstrip("\n") + wrote)
    if not result.ok:
        raise CheckFailed("a bench level had errors or completed nothing")


def _via_edge_text(result: BenchResult) -> str:
    assert result.via_edge is not None
    return stats.format_text(result) + "\n" + viaedgetext.format_text(result.via_edge)


@app.command()
def report(
    runs: list[str] = run_arg(
        "Run bundles (runs/<run>, a path, a profile name: its latest run, or a campaign: its arms).",
        ...,
    ),
    html: Path | None = option(None, "--html", "Write one self-contained HTML page here."),
    markdown: bool = option(False, "--markdown", "Print Markdown for a pull-request comment."),
    json_: bool = JsonOpt,
) -> None:
    """A report of evidence runs or a campaign: plots (inline SVG) and tables as one HTML page
    (with a PNG summary next to it, for chat), or Markdown. A campaign opens with its decision and
    Outcome, its arms named by role: `composegen report CAMPAIGN --html report.html`.

    Example: composegen report 8192-131k 4096-131k --html report.html  # in composegen's clone
    """
    if html is not None and (
        str(html) in ("", ".") or html.is_dir() or html.name in ("", ".", "..")
    ):
        msg = f"--html: {str(html)!r} is a directory; give the page's file name (report.html)"
        raise BadInputError(msg)
    project = _project()
    # a campaign: its arms
    specs = [arm for spec in runs for arm in (campaign_arms(project, spec) or [spec])]
    data = gather(specs, root=project.root)
    # one campaign: its arms by role (control, candidate, bracket) and its decision at the top
    heading = reportheading.heading(project, runs[0]) if len(runs) == 1 else None
    data = with_roles(data, heading.roles) if heading else data
    png = html.with_suffix(".png") if html is not None else None
    if html is not None and png is not None:
        safewrite.write_all([(html, render_html(data, heading)), (png, render_png(data, heading))])
    # the files written: their paths, unless Markdown was asked for too
    Output(json_).report(
        data,
        f"{html}\n{png}" if html is not None and not markdown else lambda: format_markdown(data),
    )
