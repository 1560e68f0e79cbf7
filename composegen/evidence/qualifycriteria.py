"""qualify's criteria as a table: one function per criterion, run in the table's order.

Each function reads the qualification (the profile's `qualify:` section, the startup report, the
request callables) and returns its criteria: none when it does not apply (no `ladder_targets`, no
edge in front), one, or several (the bench: one per floor or ceiling). What a request brought back
stays on the qualification for the bundle and the criteria after it (tools reads the gates' run).
The order and the wording are qualify's documented output (evidence/qualify.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from composegen.bench.reports import BenchResult
from composegen.errors import ComposegenError
from composegen.evidence import gates, ladder, sleepcycles
from composegen.evidence.reports.gate import GateResult
from composegen.evidence.reports.ladder import LadderResult
from composegen.evidence.reports.qualify import Criterion, Value
from composegen.evidence.reports.sleep import SleepCycles
from composegen.profiles.resolved import Resolved
from composegen.profiles.schema import Qualify, QualifyBench
from composegen.vllm import startup
from composegen.vllm.reports import StartupCheck, StartupReport
from composegen.vllm.startup import WARNING_KINDS  # startup "errors" that do not stop an engine

T = TypeVar("T")


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


@dataclass
class Qualification:
    """One qualification in progress: its inputs, then what each request brought back."""

    r: Resolved
    startup_report: StartupReport  # a StartupCheck when already checked against the profile
    run_ladder_fn: Callable[..., LadderResult]
    run_gates_fn: Callable[..., GateResult]
    run_bench_fn: Callable[..., BenchResult] | None = None
    exposure_fn: Callable[[], ExposureMatrix] | None = None
    sleep_fn: Callable[[], SleepCycles] | None = None
    probe: LadderResult | None = None
    rungs: LadderResult | None = None
    gated: GateResult | None = None
    gate_error: str | None = None
    benched: BenchResult | None = None
    slept: SleepCycles | None = None
    raw: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def q(self) -> Qualify:
        return self.r.profile.qualify or Qualify.model_validate({})

    @property
    def max_len(self) -> Any:
        max_len = self.r.flag("max-model-len")
        if isinstance(max_len, int) and max_len > 0:
            return max_len
        return self.startup_report.max_model_len

    @property
    def fatal(self) -> list[str]:
        """The startup errors that stop an engine, as the startup criterion names them."""
        fatal = [e for e in self.startup_report.errors if e.kind not in WARNING_KINDS]
        return [f"{e.kind}: {e.line[:160]}" for e in fatal]

    @property
    def ready(self) -> bool:
        return self.startup_report.ready and not self.fatal


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
    target = math.ceil(min_prompt_tokens / (1 - ladder.TOLERANCE)) + 1
    cap = max_model_len - ladder.MAX_TOKENS
    return min(target, cap) if min_prompt_tokens <= cap else target


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


def _startup(run: Qualification) -> list[Criterion]:
    reason = "; ".join(run.fatal) or "the engine did not report ready"
    ready = run.ready
    return [_criterion("startup", "ready" if ready else "not ready", "ready", ready, reason)]


def _config(run: Qualification) -> list[Criterion]:
    """The engine must run what the profile says: its own `non-default args` against the profile's
    flags."""
    report, args = run.startup_report, run.startup_report.effective_args
    if isinstance(report, StartupCheck):  # checked against the profile already
        mismatches = report.mismatches
    else:
        mismatches = (
            None if args is None else startup.mismatches(run.r.engine_flags(), args, run.r.catalog)
        )
    if mismatches == []:
        return [_criterion("config", "as profiled", "as profiled", True)]
    why = (
        "the log has no `non-default args` line to check"
        if mismatches is None
        else "; ".join(f"{m.flag}: profile {m.profile!r}, engine {m.engine!r}" for m in mismatches)
    )
    measured = f"{len(mismatches or [])} mismatch(es)"
    return [_criterion("config", measured, "as profiled", False, why)]


def _kv_pool(run: Qualification) -> list[Criterion]:
    pool, need = run.startup_report.kv_cache_tokens, run.q.min_kv_tokens or run.max_len
    passed = pool is not None and need is not None and pool >= need
    reason = "no KV cache size in the startup log" if pool is None else None
    return [_criterion("kv_pool", pool, need, passed, reason)]


def _row_reason(result: LadderResult | None) -> str | None:
    rows = result.targets if result else []
    return next((f"target {row.target}: {row.reason}" for row in rows if row.reason), None)


def _long_prompt(run: Qualification) -> list[Criterion]:
    need = run.q.min_prompt_tokens
    if not need:
        return []
    target = probe_target(need, run.max_len or 0)
    run.probe, error = _step(run.ready, run.run_ladder_fn, [target], max_model_len=run.max_len)
    largest = run.probe.largest_prompt_tokens if run.probe else None
    passed = largest is not None and largest >= need
    return [_criterion("long_prompt", largest, need, passed, error or _row_reason(run.probe))]


def _ladder(run: Qualification) -> list[Criterion]:
    targets = list(run.q.ladder_targets)
    if not targets:
        return []
    run.rungs, error = _step(run.ready, run.run_ladder_fn, targets, max_model_len=run.max_len)
    rows = run.rungs.targets if run.rungs else []
    ok_rows = sum(1 for row in rows if row.ok)
    why = error or next((f"target {row.target}: {row.reason}" for row in rows if not row.ok), None)
    return [_criterion("ladder", ok_rows, len(targets), ok_rows == len(targets), why)]


def _gate_names(run: Qualification) -> list[str]:
    """The listed gates; all six when the list is empty (a qualification without a functional
    check proves little)."""
    return list(run.q.gates) or list(gates.GATES)


def _gates(run: Qualification) -> list[Criterion]:
    names = _gate_names(run)
    run.gated, run.gate_error = _step(run.ready, run.run_gates_fn, only=names, tools=run.q.tools)
    rows = run.gated.gates if run.gated else []
    passed = sum(1 for g in rows if g.passed)
    why = run.gate_error or next((f"{g.name}: {g.reason}" for g in rows if not g.passed), None)
    all_passed = run.gated is not None and passed == len(names)
    return [_criterion("gates", passed, len(names), all_passed, why)]


def _tools(run: Qualification) -> list[Criterion]:
    if "tools" not in _gate_names(run):
        return []
    tools = run.gated.tools.passed if run.gated and run.gated.tools else None
    need = run.q.tools
    return [_criterion("tools", tools, need, tools is not None and tools >= need, run.gate_error)]


def _bench(run: Qualification) -> list[Criterion]:
    if run.q.bench is None:
        return []
    run.benched, criteria = _bench_criteria(run.q.bench, run.ready, run.run_bench_fn)
    return criteria


def _exposure(run: Qualification) -> list[Criterion]:
    """An edge fronts the stack: its exposure matrix is part of the verdict (and the bundle)."""
    if run.exposure_fn is None:
        return []
    matrix, error = _step(run.ready, run.exposure_fn)
    routes = matrix.rows if matrix else []
    as_expected = sum(1 for route in routes if route.passed)
    why = error or next((f"{x.method} {x.path}: {x.reason}" for x in routes if not x.passed), None)
    run.raw = {"exposure.json": matrix.to_json()} if matrix is not None else {}
    return [_criterion("exposure", as_expected, len(routes), bool(matrix and matrix.passed), why)]


def _sleep(run: Qualification) -> list[Criterion]:
    """`--sleep-cycles N`: sleep mode qualified on this engine (evidence/sleepcycles.py)."""
    if run.sleep_fn is None:
        return []
    run.slept, error = _step(run.ready, run.sleep_fn)
    slept = run.slept
    growth = slept.residue_growth_gib if slept else None
    failed = error or (slept.reason if slept else None)
    if slept is not None:
        run.raw["sleep.json"] = slept.to_json()
    passed = bool(slept and slept.passed)
    return [_criterion("sleep", growth, sleepcycles.MAX_GROWTH_GIB, passed, failed)]


# The criteria in qualify's order: requests run in it too (the gates after the probe, as the seed
# requires: "post-probe functional checks").
CRITERIA: dict[str, Callable[[Qualification], list[Criterion]]] = {
    "startup": _startup,
    "config": _config,
    "kv_pool": _kv_pool,
    "long_prompt": _long_prompt,
    "ladder": _ladder,
    "gates": _gates,
    "tools": _tools,
    "bench": _bench,
    "exposure": _exposure,
    "sleep": _sleep,
}


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
    all_done = bool(result) and errors == 0 and done == spec.requests
    criteria = [_criterion("bench", done, spec.requests, all_done, why)]
    for figure, field_name, at_least in BENCH_LIMITS:
        limit = getattr(spec, field_name)
        if limit is None:
            continue
        value = getattr(level, figure) if level else None
        passed = value is not None and (value >= limit if at_least else value <= limit)
        reason = error or (
            f"{figure} unknown" if value is None else f"{value} {'<' if at_least else '>'} {limit}"
        )
        criteria.append(_criterion(figure, value, limit, passed, reason))
    return result, criteria
