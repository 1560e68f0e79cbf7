"""Functional gates against a running OpenAI-compatible endpoint (vLLM or the emulator).

`run_gates(base_url, model, *, api_key=None, tools=20, only=None, timeout=120, max_tokens=1024,
reasoning_effort=None) -> GateResult`, gates in this order:
  smoke         a Python one-liner; the answer must contain `sum(`
  json          json_object (an object with key `language`) and strict json_schema (validated by `jsonschema`;
                enums, integers, a boolean, a nested object)
  tools         N distinct typed tools (required fields, enums, integer ranges, nested objects, arrays); each
                request sends all N and forces one with tool_choice; the call must name it and its
                arguments must validate against its schema. Passes only at N/N
  stream_tools  the weather tool streamed (tool_choice auto): deltas reassembled by index into valid arguments,
                finish_reason `tool_calls`, no parser markup leaking into content or arguments
  continuation  assistant tool_calls + a tool result -> a final text answer using the result, finish `stop`
  responses     Responses API: status `completed`, output text containing READY
  equivalence   (a campaign's, with `reference`) ANSWER_PROMPTS at temperature 0 and seed 0: every
                answer must be the reference's (the control arm's), each difference named by prompt;
                with an empty reference the answers are recorded as one (the control arm)
Any `length` finish fails its gate. Requests run one at a time (N queued requests at max-num-seqs 1
measure the scheduler, not the model). The result is reports.gate.GateResult (`schema --report
gate`). Errors: server unreachable or model not served -> EngineError; API key rejected or unknown
gate -> BadInput. A failed gate is a result, not an exception: the CLI exits 1 when `ok` is false.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from composegen.errors import BadInput
from composegen.evidence import gate_reasons as why
from composegen.evidence.gate_checks import (
    GateFailed,
    check_arguments,
    garbage,
    strip_fences,
    validate,
)
from composegen.evidence.gate_client import GateContext, api_message, check_served, client_for
from composegen.evidence.gate_tools import TOOL_CATALOG, WEATHER, _e, _i, _o, _s, tool_specs
from composegen.evidence.reports.gate import GateResult, GateRow, ToolCounts
from composegen.report import JsonObject
from composegen.wire.http import wire_cause

__all__ = ["GATES", "TOOL_CATALOG", "GateFailed", "format_text", "run_gates", "tool_specs"]
GATES = ("smoke", "json", "tools", "stream_tools", "continuation", "responses")


def gate_smoke(ctx: GateContext) -> JsonObject:
    prompt = "Write a Python one-liner that returns the sum of a list `xs`."
    choice, resp = ctx.chat([{"role": "user", "content": prompt}])
    content = choice.message.content or ""
    if "sum(" not in content:
        raise GateFailed("the answer does not contain `sum(`", content=content[:200])
    return {
        "finish_reason": choice.finish_reason,
        "usage": resp.usage.model_dump() if resp.usage else None,
    }


JSON_SCHEMA = _o(
    ["language", "major_version", "statically_typed", "creator"],
    language=_e("python", "rust", "go"),
    major_version=_i("major version", 1, 99),
    statically_typed={"type": "boolean"},
    creator=_o(["name", "year"], name=_s("full name"), year=_i("year work began", 1900, 2100)),
)


def _json_answer(ctx: GateContext, what: str, prompt: str, response_format: dict) -> Any:
    messages = [{"role": "user", "content": prompt}]
    choice, _ = ctx.chat(messages, allow_length=True, response_format=response_format)
    text = strip_fences(choice.message.content)
    try:
        return json.loads(text)
    except ValueError as exc:
        cut = (
            "; finish_reason length: the answer was cut off"
            if choice.finish_reason == "length"
            else ""
        )
        raise GateFailed(
            f"{what}: the answer is not JSON ({exc}{cut})", content=text[:200]
        ) from None


def gate_json(ctx: GateContext) -> JsonObject:
    value = _json_answer(
        ctx,
        "json_object",
        'Return ONLY a JSON object: {"language": "python", "ok": true}',
        {"type": "json_object"},
    )
    if not isinstance(value, dict) or "language" not in value:
        raise GateFailed("json_object: not an object with key `language`", value=value)
    prompt = (
        "Describe the Python programming language as JSON: language, its current major version, whether it is "
        "statically typed, and its creator (name and the year work on it began)."
    )
    fmt = {
        "type": "json_schema",
        "json_schema": {"name": "language_facts", "strict": True, "schema": JSON_SCHEMA},
    }
    value = _json_answer(ctx, "json_schema", prompt, fmt)
    problem = validate(value, JSON_SCHEMA)
    if problem:
        raise GateFailed(f"json_schema: does not validate: {problem}", value=value)
    return {"json_object": True, "json_schema": True, "value": value}


def gate_tools(ctx: GateContext) -> JsonObject:
    import openai

    specs = tool_specs(ctx.n_tools)
    all_tools = [tool.spec for tool in specs]
    failures, passed = [], 0
    for name, tool, prompt in specs:
        try:
            choice, _ = ctx.chat(
                [{"role": "user", "content": prompt}],
                allow_length=True,  # a call cut short shows as "no valid call", its real cause
                tools=all_tools,
                tool_choice={"type": "function", "function": {"name": name}},
            )
            calls = choice.message.tool_calls or []
            if not calls:
                raise GateFailed(why.no_call_reason(choice.message.content, choice.finish_reason))
            if choice.finish_reason == "length":
                msg = f"finish_reason length (max_tokens {ctx.max_tokens} ran out inside the call)"
                raise GateFailed(msg)
            call = calls[0]
            if call.function.name != name:
                raise GateFailed(f"called {call.function.name!r}")
            check_arguments(call.function.arguments, tool["function"]["parameters"], {})
            passed += 1
        except GateFailed as exc:
            failures.append({"tool": name, "reason": str(exc)})
        # one tool's 400 must not hide the other tools' results
        except openai.APIStatusError as exc:
            reason = why.http_reason(exc.status_code, api_message(exc))
            failures.append({"tool": name, "reason": reason})
    details = {"passed": passed, "total": len(specs), "failures": failures}
    if failures:
        first = failures[0]
        raise GateFailed(
            f"{passed}/{len(specs)} tools; {first['tool']}: {first['reason']}", **details
        )
    return details


def gate_stream_tools(ctx: GateContext) -> JsonObject:
    name, _, params, prompt = WEATHER
    tool = tool_specs(1)[0].spec
    stream = ctx.client.chat.completions.create(
        model=ctx.model,
        messages=[{"role": "user", "content": prompt + " Use the get_weather tool."}],
        tools=[tool],
        tool_choice="auto",
        max_tokens=ctx.max_tokens,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
        **ctx.extra,
    )
    calls: dict[int, dict] = {}
    content, finish, chunks = "", None, 0
    for chunk in stream:
        chunks += 1
        for choice in chunk.choices or []:
            delta = choice.delta
            content += delta.content or ""
            for part in delta.tool_calls or []:
                call = calls.setdefault(part.index, {"id": None, "name": "", "arguments": ""})
                call["id"] = part.id or call["id"]
                if part.function is not None:
                    call["name"] += part.function.name or ""
                    call["arguments"] += part.function.arguments or ""
            finish = choice.finish_reason or finish
    details = {"chunks": chunks, "finish_reason": finish, "calls": list(calls.values())}
    if not calls:
        raise GateFailed(why.no_call_reason(content, finish), **details)
    if finish != "tool_calls":
        raise GateFailed(f"finish_reason {finish!r}, expected 'tool_calls'", **details)
    if not calls or calls[min(calls)]["name"] != name:
        raise GateFailed(f"no streamed {name} call", **details)
    marker = garbage(content) or garbage(calls[min(calls)]["arguments"])
    if marker:
        raise GateFailed(f"parser markup {marker!r} leaked into the stream", **details)
    check_arguments(calls[min(calls)]["arguments"], params, details)
    return details


def gate_continuation(ctx: GateContext) -> JsonObject:
    tool = tool_specs(1)[0].spec
    result = {"city": "Oakland", "temperature_f": 72, "conditions": "sunny"}
    messages: list[dict] = [
        {"role": "user", "content": WEATHER[3]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_weather_1",
                    "type": "function",
                    "function": {
                        "name": "get_weather",
                        "arguments": json.dumps({"city": "Oakland", "unit": "fahrenheit"}),
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_weather_1", "content": json.dumps(result)},
    ]
    choice, _ = ctx.chat(messages, tools=[tool])
    content = choice.message.content or ""
    details = {"finish_reason": choice.finish_reason, "content": content[:200]}
    if choice.message.tool_calls:
        raise GateFailed("called a tool again instead of answering", **details)
    if choice.finish_reason != "stop":
        raise GateFailed(f"finish_reason {choice.finish_reason!r}, expected 'stop'", **details)
    if "72" not in content:
        raise GateFailed("the answer does not use the tool result (72)", **details)
    return details


def gate_responses(ctx: GateContext) -> JsonObject:
    extra = {"reasoning": {"effort": ctx.extra["reasoning_effort"]}} if ctx.extra else {}
    resp = ctx.client.responses.create(
        model=ctx.model,
        input="Reply with exactly READY",
        max_output_tokens=ctx.max_tokens,
        temperature=0,
        **extra,
    )  # temperature 0 as the chat gates: the same answer every run
    text = resp.output_text or ""
    details = {"status": resp.status, "output_text": text[:200]}
    if resp.status != "completed":
        raise GateFailed(f"status {resp.status!r}, expected 'completed'", **details)
    if "READY" not in text.upper():
        raise GateFailed("the output text does not say READY", **details)
    return details


ANSWER_PROMPTS = (
    "What is the capital of France? Answer in one word.",
    "Write one sentence about a lighthouse at night.",
    "List three prime numbers greater than ten.",
    "Explain in one sentence what a GPU is for.",
)


def gate_equivalence(ctx: GateContext) -> dict[str, list[str] | bool]:
    answers = [
        ctx.chat([{"role": "user", "content": p}], allow_length=True, seed=0)[0].message.content
        or ""
        for p in ANSWER_PROMPTS
    ]
    pairs = enumerate(zip(ctx.reference or [], answers, strict=False), 1)
    differ = [
        {"prompt": n, "control": want[:200], "candidate": got[:200]}
        for n, (want, got) in pairs
        if want != got
    ]
    if differ:
        said = ", ".join(str(d["prompt"]) for d in differ)
        msg = f"{len(differ)} of {len(answers)} answers differ from the control's (prompt {said})"
        raise GateFailed(msg, answers=answers, differences=differ)
    return {"answers": answers, "compared": bool(ctx.reference)}


RUNNERS: dict[str, Callable[[GateContext], JsonObject]] = {
    "smoke": gate_smoke,
    "json": gate_json,
    "tools": gate_tools,
    "stream_tools": gate_stream_tools,
    "continuation": gate_continuation,
    "responses": gate_responses,
    "equivalence": gate_equivalence,
}


def selected(only: str | Sequence[str] | None) -> list[str]:
    raw = GATES if only is None else (only.split(",") if isinstance(only, str) else only)
    names = [n.strip() for n in raw if n.strip()]
    unknown = [n for n in names if n not in RUNNERS]
    if unknown or not names:
        msg = f"gate: --only: unknown gate {', '.join(unknown) or '(none given)'} (known: {', '.join(GATES)})"
        raise BadInput(msg)
    return [g for g in GATES if g in names]


def run_one(name: str, ctx: GateContext) -> GateRow:
    import openai

    started = time.monotonic()
    try:
        details, passed, reason = RUNNERS[name](ctx), True, None
    except GateFailed as exc:
        details, passed, reason = exc.details, False, str(exc)
    except openai.APIStatusError as exc:
        reason = why.http_reason(exc.status_code, api_message(exc))
        details, passed = {"status": exc.status_code}, False
    except (openai.APIConnectionError, openai.APITimeoutError) as exc:
        # a reply too slow, too large or of the wrong shape: exit 3, one line
        if lied := wire_cause(exc):
            raise lied from None
        details, passed, reason = {}, False, f"request failed: {exc}"
    except (openai.APIError, ValueError) as exc:  # malformed responses the client could not parse
        details, passed, reason = {}, False, f"bad response: {exc}"
    latency = round(time.monotonic() - started, 3)
    return GateRow(name=name, passed=passed, latency_s=latency, reason=reason, details=details)


def run_gates(
    base_url: str,
    model: str,
    *,
    api_key: str | None = None,
    tools: int = 20,
    only: str | Sequence[str] | None = None,
    timeout: float = 120,
    max_tokens: int = 1024,
    reasoning_effort: str | None = None,
    on_step: Callable[[str], None] | None = None,
    reference: list[str] | None = None,
) -> GateResult:
    """ON_STEP: told `gates k/N: NAME` as each gate begins and `FAIL gate NAME: reason` as one
    fails (a campaign's progress); REFERENCE (a campaign's arms): the equivalence gate runs too."""
    names = selected(only) + ([] if reference is None else ["equivalence"])
    if "tools" in names:
        tool_specs(tools)  # a bad count is bad input before any request is sent
    client = client_for(base_url, api_key, timeout)
    check_served(client, base_url, model)
    ctx = GateContext(client, model, tools, max_tokens, reasoning_effort, reference)
    results = []
    for k, name in enumerate(names, 1):
        if on_step is not None:
            on_step(f"gates {k}/{len(names)}: {name}")
        results.append(row := run_one(name, ctx))
        if on_step is not None and not row.passed:  # a failure is said the moment it is known
            reason = " ".join((row.reason or "no reason given").split())
            on_step(f"FAIL gate {name}: {reason[:200]}")
    tools_row = next((g for g in results if g.name == "tools"), None)
    tool_counts = (
        ToolCounts(passed=tools_row.details.get("passed", 0), total=tools) if tools_row else None
    )
    passed = sum(g.passed for g in results)
    return GateResult(
        model=model,
        base_url=base_url,
        gates=results,
        passed=passed,
        total=len(results),
        tools=tool_counts,
        ok=passed == len(results),
    )


def format_text(result: GateResult) -> str:
    lines = [f"gates for {result.model} at {result.base_url}"]
    for g in result.gates:
        mark = "pass" if g.passed else "FAIL"
        counts = result.tools if g.name == "tools" else None
        extra = f" {counts.passed}/{counts.total}" if counts else ""
        why = f": {g.reason}" if g.reason else ""
        lines.append(f"  {mark}  {g.name:<13}{extra} ({g.latency_s:.2f} s){why}")
    verdict = "ok" if result.ok else "FAILED"
    lines.append(f"{result.passed}/{result.total} gates passed: {verdict}")
    return "\n".join(lines) + "\n"
