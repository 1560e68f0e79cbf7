"""Context ladder: one streamed request per target prompt size, sized with the server's own
tokenizer.

Sizing (why: a chars-per-token guess under-fills long prompts by tens of thousands of tokens): the
prompt is a unique salt line, filler words from a fixed pseudo-random stream, and a short question.
POST /tokenize (the chat `messages` form, so template tokens count as the API will count them)
measures the fixed overhead and one probe; words-per-token from the probe gives the first guess,
each further measurement corrects it (secant step, bisection inside the bracket). A size is accepted
when it lands in [target·(1−tolerance), target·(1+tolerance)] and never above max_model_len −
max_tokens; a target above that cap is refused with a reason, without a request. The salt makes
every prompt's first tokens unique, so prefix caching cannot turn one rung's prefill into a cache
hit of the previous one.

Timing, per request (stream_options.include_usage; time.perf_counter):
  ttft_s         request start -> first streamed content, reasoning or tool-call delta
  prefill_tok_s  API-reported prompt_tokens / ttft_s ("effective": includes queueing and scheduling)
  decode_tok_s   (completion_tokens − 1) / (end of stream − first token); null with < 2 tokens
  reasoning_tokens from usage.completion_tokens_details, else the number of reasoning deltas; never
                 mixed into content.
Before the first rung one short request is sent and not measured (`warmup` in the result): a server's
first requests after a start are slow (on a real H200 the first row's TTFT was 0.83–0.96 s, the later ones
24–42 ms), and that is not the prompt size's cost.
A row is ok when the request completed and the API-reported prompt_tokens is inside the tolerance window.
A `length` finish is recorded, not failed: the ladder measures capacity, the gates judge answers.
"""

from __future__ import annotations

import math
import secrets
import time
from collections.abc import Callable, Iterable

from composegen.bench.prompts import ChatMessage, Filler, Tokenizer, size_prompt
from composegen.errors import BadInput
from composegen.evidence.gate_client import Client, api_message, client_for
from composegen.evidence.reports.ladder import LadderResult, LadderRow, LadderWarmup
from composegen.wire.http import wire_cause

TOLERANCE = 0.005  # the default window a measured prompt may fall short of its target by
MAX_TOKENS = 64  # the default completion budget a probe leaves room for

QUESTION = "In one short sentence, what is the text above about?"
WARMUP_WORDS = 32  # the warm-up's filler: short, a prefill and a few decode steps are enough


def _messages(salt: str, filler: str) -> list[ChatMessage]:
    return [{"role": "user", "content": f"{salt}\n{filler}\n\n{QUESTION}"}]


def _window(target: int, tolerance: float, cap: int) -> tuple[int, int]:
    return math.ceil(target * (1 - tolerance)), min(math.floor(target * (1 + tolerance)), cap)


def _stream(
    row: LadderRow,
    client: Client,
    model: str,
    messages: list[ChatMessage],
    max_tokens: int,
    reasoning_effort: str | None,
) -> None:
    """Send one streamed request; its timings and usage fill the row's fields."""
    extra = {"reasoning_effort": reasoning_effort} if reasoning_effort else {}
    started = time.perf_counter()
    stream = client.chat.completions.create(
        model=model,
        messages=messages,
        max_tokens=max_tokens,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
        **extra,
    )
    first = last = None
    finish, usage, reasoning_deltas = None, None, 0
    for chunk in stream:
        now = time.perf_counter()
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices or []:
            delta = choice.delta
            thought = getattr(delta, "reasoning_content", None) or getattr(delta, "reasoning", None)
            reasoning_deltas += 1 if thought else 0
            if delta.content or thought or delta.tool_calls:
                first = first if first is not None else now
                last = now
            finish = choice.finish_reason or finish
    ended = time.perf_counter()
    row.finish_reason = finish
    if usage is None:
        row.reason = "the stream carried no usage (stream_options.include_usage)"
        return
    details = getattr(usage, "completion_tokens_details", None)
    reported = getattr(details, "reasoning_tokens", None) if details is not None else None
    prompt, completion = usage.prompt_tokens, usage.completion_tokens
    ttft = (first - started) if first is not None else None
    decode_span = (last or ended) - first if first is not None else 0
    decoding = bool(completion and completion > 1 and decode_span > 0)
    row.prompt_tokens, row.completion_tokens = prompt, completion
    row.reasoning_tokens = reported if reported is not None else reasoning_deltas
    row.ttft_s = round(ttft, 6) if ttft is not None else None
    row.prefill_tok_s = round(prompt / ttft, 1) if ttft else None
    row.decode_tok_s = round((completion - 1) / decode_span, 2) if decoding else None
    row.e2e_s = round(ended - started, 6)


def run_ladder(
    base_url: str,
    model: str,
    targets: Iterable[int],
    *,
    max_model_len: int,
    max_tokens: int = MAX_TOKENS,
    api_key: str | None = None,
    tolerance: float = TOLERANCE,
    timeout: float = 1800,
    reasoning_effort: str | None = None,
    on_step: Callable[[str], None] | None = None,
) -> LadderResult:
    """ON_STEP: told `ladder target k/N: T tokens` as each target begins (a campaign's progress)."""
    import openai  # why: the OpenAI client costs start-up time every other command would pay

    targets = [int(t) for t in targets]
    if not targets or any(t < 1 for t in targets):
        raise BadInput(f"ladder: --targets: positive token counts required, got {targets}")
    if not max_model_len or max_model_len < 1:
        raise BadInput(f"ladder: max_model_len: must be a positive integer, got {max_model_len!r}")
    if max_tokens < 1 or not 0 < tolerance < 1:
        raise BadInput(f"ladder: max_tokens {max_tokens} / tolerance {tolerance}: out of range")
    cap = max_model_len - max_tokens
    tokenizer = Tokenizer(base_url, model, api_key, timeout)
    client = client_for(base_url, api_key, timeout)
    filler = Filler()
    warm = any(t <= cap for t in targets)  # no rung will be sent: nothing to warm
    warmup = (
        _warmup(client, model, filler, max_tokens, reasoning_effort)
        if warm
        else LadderWarmup(sent=False)
    )
    rows = []
    for k, target in enumerate(targets, 1):
        if on_step is not None:
            on_step(f"ladder target {k}/{len(targets)}: {target:,} tokens")
        if target > cap:
            rows.append(
                LadderRow(
                    target=target,
                    ok=False,
                    reason=f"target {target} is above max_model_len − max_tokens = {cap}",
                )
            )
            continue
        salt = f"[context ladder {secrets.token_hex(6)}, target {target} tokens]"
        low, high = _window(target, tolerance, cap)
        count = lambda n: tokenizer.count(_messages(salt, filler.text(n)))  # noqa: E731, B023 - used in this turn only
        words, tokens, problem = size_prompt(count, target, low, high)
        if problem:
            rows.append(LadderRow(target=target, tokenized=tokens, ok=False, reason=problem))
            continue
        row = LadderRow(target=target, tokenized=tokens, ok=False)
        try:
            _stream(
                row,
                client,
                model,
                _messages(salt, filler.text(words)),
                max_tokens,
                reasoning_effort,
            )
        except openai.APIStatusError as exc:
            row.reason = f"HTTP {exc.status_code}: {api_message(exc)}"
        except (openai.APIConnectionError, openai.APITimeoutError) as exc:
            if lied := wire_cause(exc):  # a peer that lies is not a failed target: exit 3, one line
                raise lied from None
            row.reason = f"request failed: {exc}"
        if row.reason is None:
            row.ok, row.reason = _judge(row, low, high)
        rows.append(row)
    done = [
        r.prompt_tokens for r in rows if r.prompt_tokens is not None and r.finish_reason is not None
    ]
    return LadderResult(
        model=model,
        max_model_len=max_model_len,
        max_tokens=max_tokens,
        tolerance=tolerance,
        ok=all(r.ok for r in rows),
        targets=rows,
        largest_prompt_tokens=max(done) if done else None,
        warmup=warmup,
    )


def _warmup(
    client: Client, model: str, filler: Filler, max_tokens: int, reasoning_effort: str | None
) -> LadderWarmup:
    """One short unmeasured request (its own salt: it warms the server, not the prefix cache of a
    rung)."""
    import openai  # why: as in run_ladder

    messages = _messages(
        f"[context ladder warm-up {secrets.token_hex(6)}]", filler.text(WARMUP_WORDS)
    )
    got = LadderRow(target=0, ok=False)
    try:
        _stream(got, client, model, messages, min(max_tokens, 16), reasoning_effort)
    except openai.APIStatusError as exc:
        return LadderWarmup(sent=True, reason=f"HTTP {exc.status_code}: {api_message(exc)}")
    except (openai.APIConnectionError, openai.APITimeoutError) as exc:
        return LadderWarmup(sent=True, reason=f"request failed: {exc}")
    return LadderWarmup(
        sent=True, prompt_tokens=got.prompt_tokens, ttft_s=got.ttft_s, reason=got.reason
    )


def _judge(row: LadderRow, low: int, high: int) -> tuple[bool, str | None]:
    prompt = row.prompt_tokens
    if row.finish_reason is None or prompt is None:
        return False, "the stream ended without a finish_reason"
    if not low <= prompt <= high:
        return (
            False,
            f"the API reported {prompt} prompt tokens, outside [{low}, {high}] (tokenized {row.tokenized})",
        )
    return True, None


def format_text(result: LadderResult) -> str:
    head = (
        f"{'target':>9} {'prompt':>9} {'TTFT s':>8} {'prefill/s':>10} {'decode/s':>9} "
        f"{'out':>5} {'think':>5}  finish"
    )
    lines = [
        f"context ladder for {result.model} (max_model_len {result.max_model_len}, ±{result.tolerance * 100:g}%)",
        head,
    ]
    show = lambda v, fmt: "-" if v is None else format(v, fmt)  # noqa: E731
    for r in result.targets:
        lines.append(
            f"{r.target:>9,} {show(r.prompt_tokens, ',d'):>9} {show(r.ttft_s, '.3f'):>8} "
            f"{show(r.prefill_tok_s, ',.0f'):>10} {show(r.decode_tok_s, '.2f'):>9} "
            f"{show(r.completion_tokens, 'd'):>5} {show(r.reasoning_tokens, 'd'):>5}  "
            f"{r.finish_reason or '-'}" + ("" if r.ok else f"  FAIL: {r.reason}")
        )
    largest = result.largest_prompt_tokens
    lines.append(
        f"largest API-reported prompt: {largest:,}"
        if largest is not None
        else "no request completed"
    )
    return "\n".join(lines) + "\n"
