"""Qualify a running profile: startup pool, an actual long prompt, the context ladder, then
functional gates.

The run_*_fn callables carry the endpoint (the CLI binds base_url, model and api_key).

Criteria, from r.profile.qualify (a profile without a `qualify:` section gets the defaults), in
order:
  startup      the engine reported ready, with no fatal startup errors
  kv_pool      engine-reported KV tokens ≥ min_kv_tokens (default: max-model-len)
  long_prompt  (min_prompt_tokens) one ladder request sized just above it — ceil(min / (1 − tolerance)) + 1,
               so even the bottom of the ±tolerance window is above — must complete with an
               API-reported prompt ≥ min_prompt_tokens
  ladder       (ladder_targets) every target's row ok (sized within tolerance, completed)
  gates        after the probe, as the seed requires ("post-probe functional checks"): the listed gates
               (all six when the list is empty: a qualification without a functional check proves
               little)
  tools        (when the tools gate runs) typed tools passed ≥ qualify.tools
  exposure     (when an edge fronts the stack; the caller passes exposure_fn) every route of the edge's
               exposure gate as expected; its matrix goes into the bundle as exposure.json
  bench        (qualify.bench) one closed-loop level of `composegen bench` at bench.concurrency: every
               request completed; then one criterion per floor or ceiling it sets, named as the figure
               (request_throughput, output_throughput ≥ min_*; median_ttft_ms, p99_ttft_ms,
               median_tpot_ms, p99_e2el_ms ≤ max_*)
Each criterion is one function in qualifycriteria.CRITERIA (the table, in this order) and gives
reports.qualify.Criterion rows (reason null when passed). Requests are not sent when the engine is
not ready; their criteria fail with reason "not run".

The evidence bundle holds startup, gates, ladder and qualify.json; exit 0 qualified, 1 not.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Literal

from composegen import privatestate
from composegen.bench import closed
from composegen.bench.reports import BenchResult
from composegen.evidence import bundle as evidence
from composegen.evidence import capture, gates, ladder, sleepcycles
from composegen.evidence.qualifycriteria import (
    CRITERIA,
    ExposureMatrix,
    Qualification,
    probe_target,
)
from composegen.evidence.reports.gate import GateResult
from composegen.evidence.reports.ladder import LadderResult
from composegen.evidence.reports.qualify import QualifyResult
from composegen.evidence.reports.sleep import SleepCycles
from composegen.profiles.resolved import Resolved
from composegen.project import Project
from composegen.stack import driver
from composegen.stack.reports import LiveIdentity
from composegen.vllm.reports import StartupReport

__all__ = ["ExposureMatrix", "exit_code", "format_text", "probe_target", "qualify", "qualify_stack"]


def _merge_ladders(parts: list[LadderResult]) -> LadderResult | None:
    if not parts:
        return None
    sizes = [p.largest_prompt_tokens for p in parts if p.largest_prompt_tokens is not None]
    return parts[0].model_copy(
        update={
            "targets": [row for p in parts for row in p.targets],
            "largest_prompt_tokens": max(sizes) if sizes else None,
            "ok": all(p.ok for p in parts),
        }
    )


def qualify(
    project: Project,
    r: Resolved,
    *,
    startup_report: StartupReport,
    run_ladder_fn: Callable[..., LadderResult],
    run_gates_fn: Callable[..., GateResult],
    startup_log_text: str | None = None,
    source: Literal["stack", "log"] = "stack",
    container: LiveIdentity | None = None,
    run_bench_fn: Callable[..., BenchResult] | None = None,
    exposure_fn: Callable[[], ExposureMatrix] | None = None,
    sleep_fn: Callable[[], SleepCycles] | None = None,
) -> QualifyResult:
    run = Qualification(
        r,
        startup_report,
        run_ladder_fn,
        run_gates_fn,
        run_bench_fn=run_bench_fn,
        exposure_fn=exposure_fn,
        sleep_fn=sleep_fn,
    )
    criteria = [c for check in CRITERIA.values() for c in check(run)]
    qualified = all(c.passed for c in criteria)
    merged = _merge_ladders([p for p in (run.probe, run.rungs) if p])
    emulated = bool(container and container.emulated)
    verdict = {
        "profile": r.name,
        "hash": r.hash,
        "qualified": qualified,
        "criteria": [c.to_json() for c in criteria],
        "emulated": emulated,
        # qualify.json of the bundle: written as JSON, sealed: `promote` accepts only a verdict
        # written here
    }
    verdict["seal"] = privatestate.seal(project, verdict)
    bundle_path = evidence.write_run(
        project,
        r,
        startup_log_text=startup_log_text,
        startup_report=startup_report,
        gates=run.gated,
        ladder=merged,
        source=source,
        extra_raw={"qualify.json": verdict, **run.raw},
        container=container,
        bench=run.benched,
    )
    return QualifyResult(
        profile=r.name,
        hash=r.hash,
        qualified=qualified,
        criteria=criteria,
        emulated=emulated,
        run=str(bundle_path),
        ladder=merged,
        gates=run.gated,
        bench=run.benched,
        sleep=run.slept,
    )


def qualify_stack(
    project: Project,
    r: Resolved,
    exposure_fn: Callable[[], ExposureMatrix] | None = None,
    sleep_cycles: int = 0,
    on_step: Callable[[str], None] | None = None,
) -> QualifyResult:
    """ON_STEP: told each gate and ladder target as it begins (a campaign's progress)."""
    live = capture.live_stack(project, r)
    cycles = functools.partial(sleepcycles.run, project, r, sleep_cycles, live.identity.emulated)
    ep, served = driver.endpoint(r), r.profile.model.served_name
    return qualify(
        project,
        r,
        startup_report=live.startup,
        startup_log_text=live.log,
        container=live.identity,
        run_ladder_fn=functools.partial(
            ladder.run_ladder, ep.base_url, served, api_key=ep.api_key, on_step=on_step
        ),
        run_gates_fn=functools.partial(
            gates.run_gates, ep.base_url, served, api_key=ep.api_key, on_step=on_step
        ),
        run_bench_fn=functools.partial(
            closed.run_bench,
            ep.base_url,
            served,
            api_key=ep.api_key,
            emulated=live.identity.emulated,
        ),
        exposure_fn=exposure_fn,
        sleep_fn=cycles if sleep_cycles else None,
    )


def exit_code(result: QualifyResult) -> int:
    return 0 if result.qualified else 1


def format_text(result: QualifyResult) -> str:
    lines = [f"qualify {result.profile} (hash {result.hash})"]
    for c in result.criteria:
        mark = "pass" if c.passed else "FAIL"
        measured = f"{c.measured:,}" if isinstance(c.measured, int) else str(c.measured)
        threshold = f"{c.threshold:,}" if isinstance(c.threshold, int) else str(c.threshold)
        why = f": {c.reason}" if c.reason else ""
        lines.append(f"  {mark}  {c.name:<12} {measured} (need {threshold}){why}")
    lines.append(f"{'QUALIFIED' if result.qualified else 'NOT qualified'}; evidence: {result.run}")
    if result.emulated:
        lines.append(
            "EMULATED vLLM: this exercised composegen and the criteria, not a real engine or model"
        )
    return "\n".join(lines) + "\n"
