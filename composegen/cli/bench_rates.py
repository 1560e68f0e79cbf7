"""bench's open loop (`--request-rate`, `--find-max`): parse, call the bench's door, print."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import typer

from composegen.bench import closed as benching
from composegen.bench import opentext, rates, schedule
from composegen.bench.spec import BenchSpec, check_search
from composegen.cli.optiongroups import option
from composegen.errors import BadInput, CheckFailed
from composegen.output import Output
from composegen.profiles.resolved import Resolved
from composegen.project import Project


@dataclass(frozen=True)
class OpenAsk:
    """bench's open-loop options (`--request-rate`, `--find-max`), as typed."""

    rates: str | None = option(
        None,
        "--request-rate",
        "Open loop: rates in requests/s (or inf), e.g. 2,4,8; with --find-max LOW,HIGH.",
    )
    burstiness: float = option(
        1.0, "--burstiness", "Gamma shape of the gaps between sends (1: Poisson, as vLLM)."
    )
    slo: str | None = option(
        None, "--slo", "Per-level limits in ms, e.g. ttft_p99=500,tpot_p99=50."
    )
    find_max: bool = typer.Option(False, "--find-max", help="Bisect LOW,HIGH for --slo's best.")
    max_levels: int = typer.Option(6, "--max-levels", help="--find-max: rates probed at most.")
    repeats: int = typer.Option(1, "--repeats", help="--find-max: levels run per probed rate.")


def run_open(
    load: Callable[[], tuple[Project, Resolved]],
    ask: OpenAsk,
    sizes: BenchSpec,
    *,
    save_vllm: Path | None,
    json_: bool,
) -> None:
    """Every argument checked (exit 2) before the stack is touched, then the levels or the search."""
    spec = rates.check_open(
        sizes, ask.rates or "", ask.slo, ask.max_levels if ask.find_max else None
    )
    if ask.find_max:
        check_search(ask.repeats, ask.max_levels)
    if save_vllm is not None:
        benching.check_results_dir(save_vllm)
    project, r = load()
    base_url, model, api_key, emulated = benching.stack_target(project, r)
    o = dataclasses.replace(spec, api_key=api_key, emulated=emulated, gpus=benching.gpus_of(r))
    if ask.find_max:
        run = rates.find_max(
            base_url, model, list(spec.rates), o, max_levels=ask.max_levels, repeats=ask.repeats
        )
    else:
        run = rates.run_rates(base_url, model, list(spec.rates), o)
    result = run.result
    saved = benching.save_vllm_results(run, save_vllm) if save_vllm is not None else []
    show = Output(json_)
    show.report(result, lambda: opentext.format_text(result))
    for path in saved:
        show.say(f"wrote {path} (vllm bench serve's result shape)")
    if not result.ok:
        raise CheckFailed("a bench level had errors or completed nothing")
    if result.slos and not ask.find_max and not all(lv.slo_met for lv in result.levels):
        raise CheckFailed("a bench level broke the SLOs (--slo)")


def campaign_rates(text: str | None, concurrency: str | None) -> list[float]:
    """`campaign run --bench-rates`: finite rates (a campaign's state is JSON), not with --bench."""
    rates = schedule.parse_rates(text, "campaign run: --bench-rates") if text else []
    if rates and (concurrency or float("inf") in rates):
        msg = "campaign run: --bench-rates: finite rates, and not with --bench (one bench per arm)"
        raise BadInput(msg)
    return rates
