"""An evidence bundle of a profile's running stack, captured through the stack room's door (driver):
its startup log and report, which container runs (profile hash, image, emulated), optionally gates,
a context ladder and a bench; then written by bundle.write_run.

`capture_stack(project, r, *, gate=False, ladder_targets=None, tools=None, bench=None,
extra_raw=None) -> Path` `live_stack(project, r) -> LiveStack` (startup log text, startup report,
container identity): refused (CheckFailed) when the running container was started from another
version of the profile.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from composegen.bench import rates
from composegen.bench.closed import SweepOptions, gpus_of, run_sweep
from composegen.bench.reports import BenchResult
from composegen.errors import CheckFailed
from composegen.evidence import bundle, ladder
from composegen.evidence.gatecheck import stack_gates
from composegen.profiles.resolved import Resolved
from composegen.project import Project
from composegen.report import Report
from composegen.stack import driver
from composegen.stack.reports import LiveIdentity
from composegen.vllm.reports import StartupCheck


@dataclass(frozen=True)
class LiveStack:
    log: str  # the container's startup log
    startup: StartupCheck  # driver.startup_check: the startup report and the flag mismatches
    identity: LiveIdentity


def live_stack(project: Project, r: Resolved) -> LiveStack:
    """The startup log, startup report and identity of the profile's running vLLM container. Refuses
    when the container was started from another version of the profile: evidence must describe what
    runs, not what the profile says now."""
    ctr = driver.running_container(project, r)
    identity = driver.live_identity(ctr)
    if identity.hash != r.hash:
        raise CheckFailed(
            f"{r.name}: the running container was started from profile hash {identity.hash}, the profile now "
            f"resolves to {r.hash}; evidence would describe a configuration that is not running",
            hint=f"`composegen down {r.name}` and `composegen up {r.name}{' --emulate' * identity.emulated}` "
            "to run what the profile says",
        )
    return LiveStack(driver.container_log(ctr), driver.startup_check(r, ctr), identity)


def _open_bench(
    r: Resolved, ep: Any, served: str, emulated: bool | None, bench: Mapping[str, Any]
) -> BenchResult:
    options = rates.Options(
        input_tokens=bench["input_tokens"],
        output_tokens=bench["output_tokens"],
        requests=bench.get("requests"),
        duration=bench.get("duration"),
        api_key=ep.api_key,
        emulated=emulated,
        gpus=gpus_of(r),
    )
    return rates.run_rates(ep.base_url, served, list(bench["rates"]), options).result


def _sweep_result(
    base_url: str,
    model: str,
    levels: list[int],
    options: SweepOptions,
    *,
    api_key: str | None,
    gpus: int,
) -> BenchResult:
    return run_sweep(base_url, model, levels, options, api_key=api_key, gpus=gpus).result


def capture_stack(
    project: Project,
    r: Resolved,
    *,
    gate: bool = False,
    ladder_targets: list[int] | None = None,
    tools: int | None = None,
    bench: dict[str, Any] | None = None,
    extra_raw: Mapping[str, Report] | None = None,
    bench_runner: Callable[..., BenchResult] | None = None,
    on_step: Callable[[str], None] | None = None,
) -> Path:
    """`bench`: SweepOptions' fields plus "levels" (evidence --bench), or "rates" with
    input_tokens, output_tokens and requests or duration (an open-loop arm); `bench_runner`, when
    given, runs it instead (levels, SweepOptions: `--bench-via-edge`'s edge.benchvia);
    `extra_raw`: {file name: report} kept as write_run's (the edge's exposure.json); `on_step`:
    told each step as it begins (gates k/N, ladder target k/N, bench)."""
    live = live_stack(project, r)
    report = live.startup
    ep, served = driver.endpoint(r), r.profile.model.served_name
    tools = tools or 20  # as `composegen gate`; qualify uses the profile's own count
    gate_result = stack_gates(r, tools=tools, on_step=on_step) if gate else None
    ladder_result = None
    if ladder_targets:
        ladder_result = ladder.run_ladder(
            ep.base_url,
            served,
            ladder_targets,
            api_key=ep.api_key,
            max_model_len=report.max_model_len or r.flag("max-model-len"),
            on_step=on_step,
        )
    bench_result: BenchResult | None = None
    if bench and "rates" in bench:  # open loop: evidence's or a campaign's --bench-rates
        if on_step is not None:
            on_step(f"bench at {', '.join(f'{rate:g}' for rate in bench['rates'])} requests/s")
        bench_result = _open_bench(r, ep, served, live.identity.emulated, bench)
    elif bench:
        fields = {k: v for k, v in bench.items() if k != "levels"}
        options = SweepOptions(**fields, emulated=live.identity.emulated)
        if on_step is not None:
            on_step(f"bench at concurrency {', '.join(map(str, bench['levels']))}")
        run = bench_runner or functools.partial(
            _sweep_result,
            ep.base_url,
            served,
            api_key=ep.api_key,
            gpus=gpus_of(r),  # the frontier's per-GPU figure
        )
        bench_result = run(bench["levels"], options)
    return bundle.write_run(
        project,
        r,
        startup_log_text=live.log,
        startup_report=report,
        gates=gate_result,
        ladder=ladder_result,
        container=live.identity,
        bench=bench_result,
        extra_raw={name: part.to_json() for name, part in (extra_raw or {}).items()},
    )
