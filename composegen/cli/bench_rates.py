"""bench's open loop (`--request-rate`, `--find-max`): parse, call evidence's door, print."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from composegen.errors import CheckFailed
from composegen.evidence import bench as benching
from composegen.evidence import benchopentext, benchrates
from composegen.output import emit_json, out
from composegen.profiles.resolved import Resolved
from composegen.project import Project


def run_open(
    load: tuple[Project, Resolved],
    rates_text: str,
    options: benchrates.Options,
    *,
    find_max: bool,
    max_levels: int,
    repeats: int,
    save_vllm: Path | None,
    json_: bool,
) -> None:
    project, r = load
    base_url, model, api_key, emulated = benching.stack_target(project, r)
    gpus = benching.gpus_of(r)
    o = dataclasses.replace(options, api_key=api_key, emulated=emulated, gpus=gpus)
    rates, _ = benchrates.check_open(rates_text, o.burstiness, None, False, max_levels)
    if find_max:
        run = benchrates.find_max(base_url, model, rates, o, max_levels=max_levels, repeats=repeats)
    else:
        run = benchrates.run_rates(base_url, model, rates, o)
    result = run.result
    saved = benching.save_vllm_results(run, save_vllm) if save_vllm is not None else []
    emit_json(result.to_json()) if json_ else out(benchopentext.format_text(result))
    for path in saved if not json_ else []:
        out(f"wrote {path} (vllm bench serve's result shape)")
    if not result.ok:
        raise CheckFailed("a bench level had errors or completed nothing")
    if result.slos and not find_max and not all(lv.slo_met for lv in result.levels):
        raise CheckFailed("a bench level broke the SLOs (--slo)")
