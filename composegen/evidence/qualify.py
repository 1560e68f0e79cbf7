"""Qualify a running profile: startup pool, an actual long prompt, the context ladder, then functional gates.

`qualify(project, r, *, startup_report, run_ladder_fn, run_gates_fn, startup_log_text=None,
source="stack") -> dict`

The callables carry the endpoint (the CLI binds base_url, model and api_key):
  run_ladder_fn(targets: list[int], *, max_model_len: int) -> ladder.run_ladder result
  run_gates_fn(*, only: list[str], tools: int) -> gates.run_gates result
  run_bench_fn(levels: list[int], **bench options) -> benchstats.BenchResult   (only with qualify.bench)

Criteria, from r.profile.qualify (a profile without a `qualify:` section gets the defaults), in order:
  startup      the engine reported ready, with no fatal startup errors
  kv_pool      engine-reported KV tokens ≥ min_kv_tokens (default: max-model-len)
  long_prompt  (min_prompt_tokens) one ladder request sized just above it — ceil(min / (1 − tolerance)) + 1,
               so even the bottom of the ±tolerance window is above — must complete with an API-reported
               prompt ≥ min_prompt_tokens
  ladder       (ladder_targets) every target's row ok (sized within tolerance, completed)
  gates        after the probe, as the seed requires ("post-probe functional checks"): the listed gates
               (all six when the list is empty: a qualification without a functional check proves little)
  tools        (when the tools gate runs) typed tools passed ≥ qualify.tools
  bench        (qualify.bench) one closed-loop level of `composegen bench` at bench.concurrency: every
               request completed; then one criterion per floor or ceiling it sets, named as the figure
               (request_throughput, output_throughput ≥ min_*; median_ttft_ms, p99_ttft_ms,
               median_tpot_ms, p99_e2el_ms ≤ max_*)
Each criterion: {"name", "measured", "threshold", "passed", "reason" (null when passed)}. Requests are
not sent when the engine is not ready; their criteria fail with reason "not run".

`qualify_stack(project, r) -> dict`: the same on the profile's running stack (CLI `qualify NAME`).

Result (stable keys): {"profile", "hash", "qualified": bool, "criteria": [...], "run": bundle path,
"ladder": merged probe + ladder result | null, "gates": gates result | null}. The evidence bundle
(evidence.write_run) holds startup, gates, ladder and qualify.json. exit_code(result): 0 qualified, 1 not.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from composegen.errors import ComposegenError
from composegen.evidence import bundle as evidence
from composegen.evidence.gates import GATES
from composegen.evidence.models import QualifyResult
from composegen.profiles.resolved import Resolved
from composegen.profiles.schema import Qualify
from composegen.project import Project
from composegen.vllm.startup import WARNING_KINDS  # startup "errors" that do not stop an engine

TOLERANCE = 0.005  # ladder.run_ladder's default window
PROBE_MAX_TOKENS = 64  # ladder.run_ladder's default completion budget


def _criterion(name: str, measured, threshold, passed: bool, reason: str | None = None) -> dict:
    return {
        "name": name,
        "measured": measured,
        "threshold": threshold,
        "passed": bool(passed),
        "reason": None if passed else (reason or f"{measured} < {threshold}"),
    }


def probe_target(min_prompt_tokens: int, max_model_len: int) -> int:
    target = math.ceil(min_prompt_tokens / (1 - TOLERANCE)) + 1
    cap = max_model_len - PROBE_MAX_TOKENS
    return min(target, cap) if min_prompt_tokens <= cap else target


def _merge_ladders(parts: list[dict]) -> dict | None:
    parts = [p for p in parts if p]
    if not parts:
        return None
    merged = {**parts[0], "targets": [row for p in parts for row in p["targets"]]}
    sizes = [p["largest_prompt_tokens"] for p in parts if p.get("largest_prompt_tokens") is not None]
    merged["largest_prompt_tokens"] = max(sizes) if sizes else None
    merged["ok"] = all(p.get("ok") for p in parts)
    return merged


def _step(ready: bool, fn: Callable, *args, **kwargs) -> tuple[dict | None, str | None]:
    """(result, None), or (None, why not): no requests to an engine that is not ready, and an engine that
    dies mid-way is a failed criterion, still recorded, not an abort."""
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
    run_ladder_fn: Callable,
    run_gates_fn: Callable,
    startup_log_text: str | None = None,
    source: str = "stack",
    container: dict | None = None,
    run_bench_fn: Callable | None = None,
) -> dict:
    q = r.profile.qualify or Qualify.model_validate({})
    max_len = r.flag("max-model-len")
    max_len = max_len if isinstance(max_len, int) and max_len > 0 else startup_report.get("max_model_len")
    criteria = []
    fatal = [e for e in startup_report.get("errors") or [] if e.get("kind") not in WARNING_KINDS]
    ready = bool(startup_report.get("ready")) and not fatal
    reason = "; ".join(f"{e['kind']}: {e['line'][:160]}" for e in fatal) or "the engine did not report ready"
    criteria.append(_criterion("startup", "ready" if ready else "not ready", "ready", ready, reason))
    # The engine must run what the profile says: its own `non-default args` against the profile's flags.
    mismatches = startup_report.get("mismatches")
    if "mismatches" not in startup_report and startup_report.get("effective_args") is not None:
        from composegen.vllm import startup

        mismatches = startup.mismatches(r.engine_flags(), startup_report["effective_args"], r.catalog)
    config_ok = mismatches == []
    why: str | None = (
        "the log has no `non-default args` line to check"
        if mismatches is None
        else "; ".join(f"{m['flag']}: profile {m['profile']!r}, engine {m['engine']!r}" for m in mismatches)
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

    probe = ladder = None
    if q.min_prompt_tokens:
        target = probe_target(q.min_prompt_tokens, max_len or 0)
        probe, error = _step(ready, run_ladder_fn, [target], max_model_len=max_len)
        largest = (probe or {}).get("largest_prompt_tokens")
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
        ladder, error = _step(ready, run_ladder_fn, list(q.ladder_targets), max_model_len=max_len)
        rows = (ladder or {}).get("targets") or []
        ok_rows = sum(1 for row in rows if row.get("ok"))
        why = error or next((f"target {row['target']}: {row['reason']}" for row in rows if not row.get("ok")), None)
        criteria.append(_criterion("ladder", ok_rows, len(q.ladder_targets), ok_rows == len(q.ladder_targets), why))
    names: list[str] = list(q.gates) or list(GATES)
    gates, error = _step(ready, run_gates_fn, only=names, tools=q.tools)
    gate_rows = (gates or {}).get("gates") or []
    passed = sum(1 for g in gate_rows if g.get("passed"))
    why = error or next((f"{g['name']}: {g['reason']}" for g in gate_rows if not g.get("passed")), None)
    criteria.append(_criterion("gates", passed, len(names), gates is not None and passed == len(names), why))
    if "tools" in names:
        tools = ((gates or {}).get("tools") or {}).get("passed")
        criteria.append(_criterion("tools", tools, q.tools, tools is not None and tools >= q.tools, error))

    bench = None
    if q.bench is not None:
        bench, bench_criteria = _bench_criteria(q.bench, ready, run_bench_fn)
        criteria += bench_criteria

    qualified = all(c["passed"] for c in criteria)
    merged = _merge_ladders([p for p in (probe, ladder) if p])
    verdict = {
        "profile": r.name,
        "hash": r.hash,
        "qualified": qualified,
        "criteria": criteria,
        "emulated": bool(container and container["emulated"]),
    }
    run = evidence.write_run(
        project,
        r,
        startup_log_text=startup_log_text,
        startup_report=startup_report,
        gates=gates,
        ladder=merged,
        source=source,
        extra_raw={"qualify.json": verdict},
        container=container,
        bench=bench,
    )
    result = {**verdict, "run": str(run), "ladder": merged, "gates": gates, "bench": bench}
    return QualifyResult.model_validate(result).to_json()


# (figure in a bench level, qualify.bench field, at least (True) or at most (False))
BENCH_LIMITS = (
    ("request_throughput", "min_request_throughput", True),
    ("output_throughput", "min_output_throughput", True),
    ("median_ttft_ms", "max_median_ttft_ms", False),
    ("p99_ttft_ms", "max_p99_ttft_ms", False),
    ("median_tpot_ms", "max_median_tpot_ms", False),
    ("p99_e2el_ms", "max_p99_e2el_ms", False),
)


def _bench_criteria(spec, ready: bool, run_bench_fn: Callable | None) -> tuple[dict | None, list[dict]]:
    """(bench result JSON, criteria): `bench` (every request completed), then each limit the profile sets."""
    options = {"requests": spec.requests, "input_tokens": spec.input_tokens, "output_tokens": spec.output_tokens}
    result: dict | None
    error: str | None
    if run_bench_fn is None:
        result, error = None, "not run: no bench client was given"
    else:
        result, error = _step(ready, lambda: run_bench_fn([spec.concurrency], **options).to_json())
    level = ((result or {}).get("levels") or [{}])[0]
    done, errors = level.get("completed"), level.get("errors")
    why = error or (level.get("error_messages") or [None])[0] or "no request completed"
    criteria = [_criterion("bench", done, spec.requests, bool(result) and errors == 0 and done == spec.requests, why)]
    for figure, field, at_least in BENCH_LIMITS:
        limit = getattr(spec, field)
        if limit is None:
            continue
        value = level.get(figure)
        passed = value is not None and (value >= limit if at_least else value <= limit)
        reason = error or (f"{figure} unknown" if value is None else f"{value} {'<' if at_least else '>'} {limit}")
        criteria.append(_criterion(figure, value, limit, passed, reason))
    return result, criteria


def qualify_stack(project: Project, r: Resolved) -> dict:
    import functools

    from composegen.evidence import bench, gates, ladder
    from composegen.stack import driver

    text, report, identity = evidence.live_stack(project, r)
    ep, served = driver.endpoint(r), r.profile.model.served_name
    return qualify(
        project,
        r,
        startup_report=report,
        startup_log_text=text,
        container=identity,
        run_ladder_fn=functools.partial(ladder.run_ladder, ep.base_url, served, api_key=ep.api_key),
        run_gates_fn=functools.partial(gates.run_gates, ep.base_url, served, api_key=ep.api_key),
        run_bench_fn=functools.partial(
            bench.run_bench, ep.base_url, served, api_key=ep.api_key, emulated=identity["emulated"]
        ),
    )


def _row_reason(result: dict | None) -> str | None:
    rows = (result or {}).get("targets") or []
    return next((f"target {row['target']}: {row['reason']}" for row in rows if row.get("reason")), None)


def exit_code(result: dict) -> int:
    return 0 if result["qualified"] else 1


def format_text(result: dict) -> str:
    lines = [f"qualify {result['profile']} (hash {result['hash']})"]
    for c in result["criteria"]:
        mark = "pass" if c["passed"] else "FAIL"
        measured = f"{c['measured']:,}" if isinstance(c["measured"], int) else str(c["measured"])
        threshold = f"{c['threshold']:,}" if isinstance(c["threshold"], int) else str(c["threshold"])
        why = f": {c['reason']}" if c["reason"] else ""
        lines.append(f"  {mark}  {c['name']:<12} {measured} (need {threshold}){why}")
    lines.append(f"{'QUALIFIED' if result['qualified'] else 'NOT qualified'}; evidence: {result['run']}")
    if result.get("emulated"):
        lines.append("EMULATED vLLM: this exercised composegen and the criteria, not a real engine or model")
    return "\n".join(lines) + "\n"
