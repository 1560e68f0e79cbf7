"""An evidence bundle of a profile's running stack, captured through the stack room's door (driver):
its startup log and report, which container runs (profile hash, image, emulated), optionally gates,
a context ladder and a bench; then written by bundle.write_run.
Refused (CheckFailed) when the running container was started from another version of the profile.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from composegen.bench import rates
from composegen.bench.closed import gpus_of, run_sweep
from composegen.bench.reports import BenchResult
from composegen.bench.spec import BenchSpec
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


def run_spec(project: Project, r: Resolved, spec: BenchSpec) -> BenchResult:
    """The spec's bench against the profile's running stack: via the edge (edge.benchvia, the
    caller's `bench_runner`), open loop at its rates, or a closed-loop sweep at its levels."""
    ep, served = driver.endpoint(r), r.profile.model.served_name
    spec = dataclasses.replace(spec, api_key=ep.api_key, gpus=gpus_of(r))  # gpus: the frontier's
    if spec.rates:
        return rates.run_rates(ep.base_url, served, list(spec.rates), spec).result
    return run_sweep(
        ep.base_url, served, spec.levels, spec, api_key=ep.api_key, gpus=spec.gpus
    ).result


def capture_stack(
    project: Project,
    r: Resolved,
    *,
    gate: bool = False,
    ladder_targets: list[int] | None = None,
    tools: int | None = None,
    bench: BenchSpec | None = None,
    extra_raw: Mapping[str, Report] | None = None,
    bench_runner: Callable[[BenchSpec], BenchResult] | None = None,
    on_step: Callable[[str], None] | None = None,
    reference: list[str] | None = None,
) -> Path:
    """`bench`: what to run (levels: a closed loop; rates: an open loop, evidence's or a campaign's
    --bench-rates); `bench_runner`, when given, runs it instead (`--bench-via-edge`'s
    edge.benchvia); `extra_raw`: {file name: report} kept as write_run's (the edge's exposure.json);
    `on_step`: told each step as it begins; `reference`: the equivalence gate's (stack_gates)."""
    live = live_stack(project, r)
    ep, served = driver.endpoint(r), r.profile.model.served_name
    gates = functools.partial(stack_gates, r, tools=tools or 20, on_step=on_step)  # 20: as `gate`
    gate_result = gates(reference=reference) if gate else None
    ladder_result = None
    if ladder_targets:
        ladder_result = ladder.run_ladder(
            ep.base_url,
            served,
            ladder_targets,
            api_key=ep.api_key,
            max_model_len=live.startup.max_model_len or r.flag("max-model-len"),
            on_step=on_step,
        )
    bench_result: BenchResult | None = None
    if bench:
        spec = dataclasses.replace(bench, emulated=live.identity.emulated)
        if on_step is not None and spec.rates:
            on_step(f"bench at {', '.join(f'{rate:g}' for rate in spec.rates)} requests/s")
        elif on_step is not None:
            on_step(f"bench at concurrency {', '.join(map(str, spec.levels))}")
        bench_result = (bench_runner or functools.partial(run_spec, project, r))(spec)
    return bundle.write_run(
        project,
        r,
        startup_log_text=live.log,
        startup_report=live.startup,
        gates=gate_result,
        ladder=ladder_result,
        container=live.identity,
        bench=bench_result,
        extra_raw={name: part.to_json() for name, part in (extra_raw or {}).items()},
    )
