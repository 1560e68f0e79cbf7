"""Qualify a running profile: startup pool, an actual long prompt, the context ladder, then
functional gates.

`qualify(project, r, *, startup_report, run_ladder_fn, run_gates_fn, startup_log_text=None,
source="stack") -> QualifyResult`

The callables carry the endpoint (the CLI binds base_url, model and api_key):
  run_ladder_fn(targets: list[int], *, max_model_len: int) -> LadderResult   (ladder.run_ladder)
  run_gates_fn(*, only: list[str], tools: int) -> GateResult                 (gates.run_gates)
  run_bench_fn(levels: list[int], **bench options) -> reports.bench.BenchResult   (only with qualify.bench)

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
Each criterion is a reports.qualify.Criterion (reason null when passed). Requests are not sent when the engine is
not ready; their criteria fail with reason "not run".

`qualify_stack(project, r) -> QualifyResult`: the same on the profile's running stack (CLI `qualify
NAME`).

The result (`schema --report qualify`) holds the verdict, the criteria, the bundle path, the merged
probe + ladder result and the gates result (null when not run). The evidence bundle
(evidence.write_run) holds startup, gates, ladder and qualify.json. exit_code(result): 0 qualified,
1 not.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from composegen import privatestate
from composegen.errors import ComposegenError
from composegen.evidence import bench, capture, gates, ladder, sleepcycles
from composegen.evidence import bundle as evidence
from composegen.evidence.reports.bench import BenchResult
from composegen.evidence.reports.gate import GateResult
from composegen.evidence.reports.ladder import LadderResult
from composegen.evidence.reports.qualify import Criterion, QualifyResult, Value
from composegen.evidence.reports.sleep import SleepCycles
from composegen.profiles.resolved import Resolved
from composegen.profiles.schema import Qualify, QualifyBench
from composegen.project import Project
from composegen.stack import driver
from composegen.stack.reports import LiveIdentity
from composegen.vllm import startup
from composegen.vllm.startup import WARNING_KINDS  # startup "errors" that do not stop an engine


class ExposureRoute(Protocol):
    """One route of the edge's exposure matrix (edge.reports.ExposureRow; edge/ sits above
    evidence/)."""

    @property
    def method(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def reason(self) -> str | None: ...
    @property
    def passed(self) -> bool: ...


class ExposureMatrix(Protocol):
    """The edge's exposure gate result (edge.reports.ExposureReport), as qualify reads it."""

    @property
    def rows(self) -> Sequence[ExposureRoute]: ...
    @property
    def passed(self) -> bool: ...
    def to_json(self) -> dict[str, Any]: ...


TOLERANCE = 0.005  # ladder.run_ladder's default window
PROBE_MAX_TOKENS = 64  # ladder.run_ladder's default completion budget


T = TypeVar("T")


def _criterion(
    name: str, measured: Value, threshold: Value, passed: bool, reason: str | None = None
) -> Criterion:
    return Criterion(
        name=name,
        measured=measured,
        threshold=threshold,
        passed=bool(passed),
        reason=None if passed else (reason or f"{measured} < {threshold}"),
    )


def probe_target(min_prompt_tokens: int, max_model_len: int) -> int:
    target = math.ceil(min_prompt_tokens / (1 - TOLERANCE)) + 1
    cap = max_model_len - PROBE_MAX_TOKENS
    return min(target, cap) if min_prompt_tokens <= cap else target


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


def _step(
    ready: bool, fn: Callable[..., T], *args: Any, **kwargs: Any
) -> tuple[T | None, str | None]:
    """(result, None), or (None, why not): no requests to an engine that is not ready, and an engine
    that dies mid-way is a failed criterion, still recorded, not an abort."""
    if not ready:
        return None, "not run: the engine is not ready"
    try:
        return fn(*args, **kwargs), None
    except ComposegenError as exc:
        return None, exc.message


def qualify(
    project: Project,
    r: Resolved,
    *,
    startup_report: dict,
    run_ladder_fn: Callable[..., LadderResult],
    run_gates_fn: Callable[..., GateResult],
    startup_log_text: str | None = None,
    source: str = "stack",
    container: LiveIdentity | None = None,
    run_bench_fn: Callable[..., BenchResult] | None = None,
    exposure_fn: Callable[[], ExposureMatrix] | None = None,
    sleep_fn: Callable[[], SleepCycles] | None = None,
) -> QualifyResult:
    q = r.profile.qualify or Qualify.model_validate({})
    max_len = r.flag("max-model-len")
    max_len = (
        max_len if isinstance(max_len, int) and max_len > 0 else startup_report.get("max_model_len")
    )
    criteria = []
    fatal = [e for e in startup_report.get("errors") or [] if e.get("kind") not in WARNING_KINDS]
    ready = bool(startup_report.get("ready")) and not fatal
    reason = (
        "; ".join(f"{e['kind']}: {e['line'][:160]}" for e in fatal)
        or "the engine did not report ready"
    )
    criteria.append(
        _criterion("startup", "ready" if ready else "not ready", "ready", ready, reason)
    )
    # The engine must run what the profile says: its own `non-default args` against the profile's
    # flags.
    mismatches = startup_report.get("mismatches")
    if "mismatches" not in startup_report and startup_report.get("effective_args") is not None:
        mismatches = startup.mismatches(
            r.engine_flags(), startup_report["effective_args"], r.catalog
        )
    config_ok = mismatches == []
    why: str | None = (
        "the log has no `non-default args` line to check"
        if mismatches is None
        else "; ".join(
            f"{m['flag']}: profile {m['profile']!r}, engine {m['engine']!r}" for m in mismatches
        )
    )
    criteria.append(
        _criterion(
            "config",
            "as profiled" if config_ok else f"{len(mismatches or [])} mismatch(es)",
            "as profiled",
            config_ok,
            None if config_ok else why,
        )
    )
    pool, need = startup_report.get("kv_cache_tokens"), q.min_kv_tokens or max_len
    criteria.append(
        _criterion(
            "kv_pool",
            pool,
            need,
            pool is not None and need is not None and pool >= need,
            "no KV cache size in the startup log" if pool is None else None,
        )
    )

    probe = rungs = None
    if q.min_prompt_tokens:
        target = probe_target(q.min_prompt_tokens, max_len or 0)
        probe, error = _step(ready, run_ladder_fn, [target], max_model_len=max_len)
        largest = probe.largest_prompt_tokens if probe else None
        criteria.append(
            _criterion(
                "long_prompt",
                largest,
                q.min_prompt_tokens,
                largest is not None and largest >= q.min_prompt_tokens,
                error or _row_reason(probe),
            )
        )
    if q.ladder_targets:
        rungs, error = _step(ready, run_ladder_fn, list(q.ladder_targets), max_model_len=max_len)
        rows = rungs.targets if rungs else []
        ok_rows = sum(1 for row in rows if row.ok)
        why = error or next(
            (f"target {row.target}: {row.reason}" for row in rows if not row.ok), None
        )
        criteria.append(
            _criterion(
                "ladder", ok_rows, len(q.ladder_targets), ok_rows == len(q.ladder_targets), why
            )
        )
    names: list[str] = list(q.gates) or list(gates.GATES)
    gated, error = _step(ready, run_gates_fn, only=names, tools=q.tools)
    gate_rows = gated.gates if gated else []
    passed = sum(1 for g in gate_rows if g.passed)
    why = error or next((f"{g.name}: {g.reason}" for g in gate_rows if not g.passed), None)
    criteria.append(
        _criterion("gates", passed, len(names), gated is not None and passed == len(names), why)
    )
    if "tools" in names:
        tools = gated.tools.passed if gated and gated.tools else None
        criteria.append(
            _criterion("tools", tools, q.tools, tools is not None and tools >= q.tools, error)
        )

    benched = None
    if q.bench is not None:
        benched, bench_criteria = _bench_criteria(q.bench, ready, run_bench_fn)
        criteria += bench_criteria

    raw: dict[str, dict[str, Any]] = {}
    # an edge fronts the stack: its exposure matrix is part of the verdict
    if exposure_fn is not None:
        matrix, error = _step(ready, exposure_fn)
        routes = matrix.rows if matrix else []
        as_expected = sum(1 for route in routes if route.passed)
        why = error or next(
            (f"{x.method} {x.path}: {x.reason}" for x in routes if not x.passed), None
        )
        criteria.append(
            _criterion("exposure", as_expected, len(routes), bool(matrix and matrix.passed), why)
        )
        raw = {"exposure.json": matrix.to_json()} if matrix is not None else {}
    slept = None
    # `--sleep-cycles N`: sleep mode qualified on this engine (evidence/sleepcycles.py)
    if sleep_fn is not None:
        slept, error = _step(ready, sleep_fn)
        growth = slept.residue_growth_gib if slept else None
        failed = error or (slept.reason if slept else None)
        criteria.append(
            _criterion(
                "sleep", growth, sleepcycles.MAX_GROWTH_GIB, bool(slept and slept.passed), failed
            )
        )
        if slept is not None:
            raw["sleep.json"] = slept.to_json()

    qualified = all(c.passed for c in criteria)
    merged = _merge_ladders([p for p in (probe, rungs) if p])
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
    run = evidence.write_run(
        project,
        r,
        startup_log_text=startup_log_text,
        startup_report=startup_report,
        gates=gated,
        ladder=merged,
        source=source,
        extra_raw={"qualify.json": verdict, **raw},
        container=container,
        bench=benched,
    )
    return QualifyResult(
        profile=r.name,
        hash=r.hash,
        qualified=qualified,
        criteria=criteria,
        emulated=emulated,
        run=str(run),
        ladder=merged,
        gates=gated,
        bench=benched,
        sleep=slept,
    )


# (figure in a bench level, qualify.bench field, at least (True) or at most (False))
BENCH_LIMITS = (
    ("request_throughput", "min_request_throughput", True),
    ("output_throughput", "min_output_throughput", True),
    ("median_ttft_ms", "max_median_ttft_ms", False),
    ("p99_ttft_ms", "max_p99_ttft_ms", False),
    ("median_tpot_ms", "max_median_tpot_ms", False),
    ("p99_e2el_ms", "max_p99_e2el_ms", False),
)


def _bench_criteria(
    spec: QualifyBench, ready: bool, run_bench_fn: Callable[..., BenchResult] | None
) -> tuple[BenchResult | None, list[Criterion]]:
    """(bench result, criteria): `bench` (every request completed), then each limit the profile
    sets."""
    options = {
        "requests": spec.requests,
        "input_tokens": spec.input_tokens,
        "output_tokens": spec.output_tokens,
    }
    result: BenchResult | None
    error: str | None
    if run_bench_fn is None:
        result, error = None, "not run: no bench client was given"
    else:
        result, error = _step(ready, run_bench_fn, [spec.concurrency], **options)
    level = result.levels[0] if result and result.levels else None
    done, errors = (level.completed, level.errors) if level else (None, None)
    why = (
        error
        or (level.error_messages[0] if level and level.error_messages else None)
        or "no request completed"
    )
    criteria = [
        _criterion(
            "bench",
            done,
            spec.requests,
            bool(result) and errors == 0 and done == spec.requests,
            why,
        )
    ]
    for figure, field, at_least in BENCH_LIMITS:
        limit = getattr(spec, field)
        if limit is None:
            continue
        value = getattr(level, figure) if level else None
        passed = value is not None and (value >= limit if at_least else value <= limit)
        reason = error or (
            f"{figure} unknown" if value is None else f"{value} {'<' if at_least else '>'} {limit}"
        )
        criteria.append(_criterion(figure, value, limit, passed, reason))
    return result, criteria


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
            bench.run_bench,
            ep.base_url,
            served,
            api_key=ep.api_key,
            emulated=live.identity.emulated,
        ),
        exposure_fn=exposure_fn,
        sleep_fn=cycles if sleep_cycles else None,
    )


def _row_reason(result: LadderResult | None) -> str | None:
    rows = result.targets if result else []
    return next((f"target {row.target}: {row.reason}" for row in rows if row.reason), None)


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
