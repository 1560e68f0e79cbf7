"""Load benchmark and report commands: bench, report."""

from __future__ import annotations

from pathlib import Path

import typer

from composegen.cli.app import JsonOpt, StackArg, app, complete_run
from composegen.cli.app import load_profile as _load
from composegen.cli.app import parse_ints as _ints
from composegen.cli.app import project as _project
from composegen.errors import CheckFailed
from composegen.output import emit_json, out


@app.command()
def bench(
    name: str = StackArg,
    concurrency: str = typer.Option("1,2,4,8", "--concurrency", help="Concurrency levels, e.g. 1,2,4,8."),
    requests: int | None = typer.Option(None, "--requests", help="Requests per level."),
    duration: float | None = typer.Option(None, "--duration", help="Seconds per level (instead of --requests)."),
    input_tokens: int = typer.Option(..., "--input-tokens", help="Prompt tokens per request (sized with /tokenize)."),
    output_tokens: int = typer.Option(..., "--output-tokens", help="max_tokens per request (ignore_eos)."),
    seed: int | None = typer.Option(None, "--seed", help="Prompt seed (default: random, recorded)."),
    goodput: str | None = typer.Option(None, "--goodput", help="SLOs in ms for goodput, e.g. ttft:500,tpot:50."),
    json_: bool = JsonOpt,
):
    """Closed-loop concurrency sweep over streamed chat completions (vllm bench serve's figures).

    Example: composegen bench 4096-131k --concurrency 1,4,16 --input-tokens 1000 --output-tokens 128
    """
    from composegen.evidence import bench as benching
    from composegen.evidence import benchstats

    slos = benchstats.parse_slos(goodput)
    levels = _ints(concurrency, "--concurrency")
    benching.check_arguments(levels, input_tokens, output_tokens, requests, duration)
    project, r = _load(name)
    result = benching.bench_stack(
        project,
        r,
        levels,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        requests=requests,
        duration=duration,
        seed=seed,
        slos=slos,
    )
    emit_json(result.to_json()) if json_ else out(benchstats.format_text(result))
    if not result.ok:
        raise CheckFailed("a bench level had errors or completed nothing")


@app.command()
def report(
    runs: list[str] = typer.Argument(
        ...,
        help="Run bundles (runs/<run>, a path, or a profile name: its latest run), one or more.",
        autocompletion=complete_run,
    ),
    html: Path | None = typer.Option(None, "--html", help="Write one self-contained HTML page here."),
    markdown: bool = typer.Option(False, "--markdown", help="Print Markdown for a pull-request comment."),
    json_: bool = JsonOpt,
):
    """A report of evidence runs: plots (inline SVG) and tables as one HTML page, or Markdown.

    Example: composegen report 8192-131k 4096-131k --html report.html
    """
    from composegen.evidence.runreport import format_markdown, gather

    project = _project()
    data = gather(runs, root=project.root)
    if html is not None:
        from composegen import safewrite
        from composegen.evidence.reportpage import render_html

        safewrite.write(html, render_html(data))
    if json_:
        emit_json(data.to_json())
    elif markdown:
        out(format_markdown(data))
    elif html is not None:
        out(str(html))
    else:
        out(format_markdown(data))
