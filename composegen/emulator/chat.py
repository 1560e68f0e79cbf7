"""OpenAI chat completions on top of replies.py: request checks, usage, response and chunk shapes.

Shapes, error texts and error params are those of a real vLLM 0.26.0 server
(tests/data/real-0.26.0-h200, checked by tests/emulator/test_conformance.py).

Behaviour notes: `tool_choice: auto` needs --enable-auto-tool-choice and --tool-call-parser, a named
tool_choice needs --tool-call-parser (400 otherwise, as in vLLM); without --reasoning-parser a
thinking request gets its reasoning inline as <think>…</think> in `content`, as a real server would
return it."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field

from composegen.emulator import replies, versions
from composegen.emulator.tokenizer import encode_chat, pieces

TOOL_CALL_OVERHEAD = 2  # tokens for the call markup around name + arguments
LORA_FAULT = "lora_corrupted"  # a wake leaves the LoRA adapters corrupted, the base model intact


@dataclass
class ServingInfo:
    model: str
    served_names: list[str]
    max_model_len: int
    auto_tool_choice: bool = False
    tool_parser: str | None = None
    reasoning_parser: str | None = None
    fault: str | None = None
    adapters: list[str] = field(default_factory=list)  # --lora-modules' names: models too
    lora_corrupted: bool = False  # EMU_FAULT=lora_corrupted after a wake: adapters answer amiss

    @property
    def name(self) -> str:
        return self.served_names[0]


def new_id(prefix: str) -> str:
    return prefix + secrets.token_hex(8)


class RequestError(Exception):
    def __init__(
        self, status: int, message: str, err_type: str = "BadRequestError", param: str | None = None
    ):
        super().__init__(message)
        self.status, self.message, self.err_type, self.param = status, message, err_type, param

    def to_json(self) -> dict:
        error = {"message": self.message, "type": self.err_type, "param": self.param}
        return {"error": {**error, "code": self.status}}


@dataclass
class ToolCall:
    id: str
    name: str
    argument_pieces: list[str]

    @property
    def arguments(self) -> str:
        return "".join(self.argument_pieces)


@dataclass
class Reply:
    prompt_tokens: int
    reasoning: list[str] = field(default_factory=list)  # token pieces
    content: list[str] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str = "stop"

    @property
    def completion_tokens(self) -> int:
        calls = sum(len(c.argument_pieces) + TOOL_CALL_OVERHEAD for c in self.tool_calls)
        return len(self.reasoning) + len(self.content) + calls

    def usage(self, details: bool = True) -> dict:
        """The `usage` object; a stream's usage chunk has no `prompt_tokens_details`
        (details=False)."""
        usage: dict = {
            "prompt_tokens": self.prompt_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "completion_tokens": self.completion_tokens,
        }
        if details:
            usage["prompt_tokens_details"] = None
        if self.reasoning:
            usage["completion_tokens_details"] = {"reasoning_tokens": len(self.reasoning)}
        return usage


def check_model(body: dict, info: ServingInfo) -> None:
    wanted = body.get("model")
    if wanted and wanted not in info.served_names + info.adapters:
        raise RequestError(404, f"The model `{wanted}` does not exist.", "NotFoundError", "model")


def _limit_error(limit: int, requested: int) -> RequestError:
    at_least = limit - requested + 1  # vLLM stops counting the prompt there
    return RequestError(
        400,
        f"This model's maximum context length is {limit} tokens. However, you requested {requested} output "
        f"tokens and your prompt contains at least {at_least} input tokens, for a total of at least {limit + 1} "
        "tokens. Please reduce the length of the input prompt or the number of requested output tokens. "
        f"(parameter=input_tokens, value={at_least})",
        param="input_tokens",
    )


def budget(wanted: object, prompt_tokens: int, limit: int) -> int:
    """Output tokens allowed: the request's max_tokens, else what is left of the context; 400s as
    vLLM's."""
    if wanted is not None:
        if isinstance(wanted, bool) or not isinstance(wanted, int) or wanted < 1:
            raise RequestError(
                400,
                f"max_tokens must be at least 1, got {wanted}. (parameter=max_tokens, value={wanted})",
                param="max_tokens",
            )
        if wanted > limit:
            raise RequestError(
                400,
                f"max_tokens={wanted} cannot be greater than max_model_len=max_total_tokens={limit}. "
                f"Please request fewer output tokens. (parameter=max_tokens, value={wanted})",
                param="max_tokens",
            )
    requested = wanted if isinstance(wanted, int) else 0
    if prompt_tokens + requested > limit:
        raise _limit_error(limit, requested)
    return requested or limit - prompt_tokens


def validation_error(
    kind: str, loc: tuple, msg: str, given: object, param: str, **ctx: str
) -> RequestError:
    """FastAPI's request-validation 400 as vLLM returns it (`type: "Bad Request"`, `param:
    "body.x"`)."""
    detail: dict = {"type": kind, "loc": loc, "msg": msg, "input": given}
    if ctx:
        detail["ctx"] = ctx
    return RequestError(400, f"1 validation error:\n  {detail!r}", "Bad Request", param)


def require_messages(body: dict) -> list[dict]:
    messages = body.get("messages")
    if "messages" not in body:
        raise validation_error(
            "missing", ("body", "messages"), "Field required", body, "body.messages"
        )
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise validation_error(
            "list_type",
            ("body", "messages"),
            "Input should be a valid list",
            messages,
            "body.messages",
        )
    return messages


def _check_tools(tools: list, tool_choice: object, info: ServingInfo) -> None:
    if not tools or tool_choice in ("none", "required"):
        return
    if isinstance(tool_choice, dict):
        wanted = (tool_choice.get("function") or {}).get("name")
        if not info.tool_parser:
            needs = "requires --tool-call-parser to be set"
            raise RequestError(400, f'tool_choice=function "{wanted}" {needs}')
        if not any((t.get("function") or t).get("name") == wanted for t in tools):
            not_passed = f"Tool '{wanted}' has not been passed in `tools`."
            raise RequestError(400, not_passed, param="tool_choice")
    elif not (info.auto_tool_choice and info.tool_parser):
        needs = "requires --enable-auto-tool-choice and --tool-call-parser to be set"
        raise RequestError(400, f'"auto" tool choice {needs}')


def _call_id(name: str, arguments: str, index: int) -> str:
    digest = hashlib.sha256(f"{index}:{name}:{arguments}".encode()).hexdigest()
    return f"chatcmpl-tool-{digest[:24]}"


def plan_chat(body: dict, info: ServingInfo) -> Reply:
    messages = require_messages(body)
    check_model(body, info)
    tools = body.get("tools") or []
    tool_choice = body.get("tool_choice", "auto" if tools else "none")
    wanted = body.get("max_completion_tokens")
    wanted = body.get("max_tokens") if wanted is None else wanted
    add_prompt = (body.get("chat_template_kwargs") or {}).get("add_generation_prompt", True)
    reply = Reply(prompt_tokens=len(encode_chat(messages, tools, add_prompt)))
    allowed = budget(wanted, reply.prompt_tokens, info.max_model_len)
    _check_tools(tools, tool_choice, info)
    effort = replies.reasoning_effort(body)
    question = replies.last_user_text(messages)
    thinking = pieces(replies.reasoning_text(question, effort)) if effort else []
    function = replies.choose_tool(tools, tool_choice, messages) if tools else None
    answer = [] if function else pieces(replies.answer_text(messages, body.get("response_format")))
    answer = answer[::-1] if info.lora_corrupted and body.get("model") in info.adapters else answer
    if info.fault == "answers_changed" and answer and not body.get("response_format"):
        answer += pieces(" (changed)")
    if thinking and not info.reasoning_parser:
        answer = pieces("<think> " + "".join(thinking) + " </think>") + answer
        thinking = []

    reply.reasoning = thinking[:allowed]
    left = allowed - len(reply.reasoning)
    if function:
        arguments = replies.tool_arguments(function, messages)
        argument_pieces = pieces(arguments)
        room, name = max(0, left - TOOL_CALL_OVERHEAD), function["name"]
        reply.tool_calls = [ToolCall(_call_id(name, arguments, 0), name, argument_pieces[:room])]
        reply.finish_reason = "tool_calls" if room >= len(argument_pieces) else "length"
    else:
        # vLLM's extension: generate all max_tokens, never stop early
        ignore_eos = body.get("ignore_eos") is True
        if ignore_eos and answer:
            answer = (answer * (left // len(answer) + 1))[:left]
        reply.content = answer[:left]
        reply.finish_reason = "length" if ignore_eos or left < len(answer) else "stop"
    if len(thinking) > allowed:
        reply.finish_reason = "length"
    return reply


def _tool_call_json(call: ToolCall) -> dict:
    function = {"name": call.name, "arguments": call.arguments}
    return {"id": call.id, "type": "function", "function": function}


def chat_completion(reply: Reply, info: ServingInfo, request_id: str, created: int) -> dict:
    message: dict = {
        "role": "assistant",
        "content": None if reply.tool_calls else "".join(reply.content),
        "refusal": None,
        "annotations": None,
        "audio": None,
        "function_call": None,
        "reasoning": "".join(reply.reasoning) or None,
    }
    if reply.tool_calls:  # vLLM leaves the key out when there are none
        message["tool_calls"] = [_tool_call_json(c) for c in reply.tool_calls]
    choice = {
        "index": 0,
        "message": message,
        "logprobs": None,
        "finish_reason": reply.finish_reason,
        "stop_reason": None,
        "token_ids": None,
        "routed_experts": None,
    }
    return {
        "id": request_id,
        "object": "chat.completion",
        "created": created,
        "model": info.name,
        "choices": [choice],
        "service_tier": None,
        "system_fingerprint": versions.active().fingerprint,
        "usage": reply.usage(),
        "prompt_logprobs": None,
        "prompt_token_ids": None,
        "prompt_text": None,
        "kv_transfer_params": None,
        "ec_transfer_params": None,
        "metrics": None,
    }


def _tool_call_deltas(reply: Reply, info: ServingInfo) -> Iterator[tuple[dict, str | None]]:
    """(delta, finish override) per streamed tool-call piece: id and name first, then argument
    fragments."""
    for index, call in enumerate(reply.tool_calls):
        head = {"index": index, **_tool_call_json(call)}
        head["function"] = {"name": call.name, "arguments": ""}
        yield {"tool_calls": [head]}, None
        fragments, finish = list(call.argument_pieces), None
        if info.fault == "broken_tool_stream":
            # Garbage like a misconfigured tool parser leaks: JSON never closes, markup in the
            # arguments.
            fragments = [*fragments[:-1], "<|tool▁call▁end|>", ' {"'] if fragments else ['{"']
            finish = "stop"
        for fragment in fragments:
            yield {"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}, finish


def chat_chunks(
    reply: Reply, info: ServingInfo, request_id: str, created: int, include_usage: bool
) -> Iterator[tuple[dict, bool]]:
    """Yield (chunk, counts_as_token) in vLLM 0.26's order: a role chunk; one chunk per token; the
    finish reason on the last token's chunk (with or without a tool parser, as the graphs recording
    shows), or in a separate `{}` delta after streamed tool calls or when no token was generated;
    the usage chunk; `system_fingerprint` on the last chunk."""
    head = {
        "id": request_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": info.name,
    }

    def chunk(delta: dict, finish: str | None = None) -> dict:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        if finish is not None:
            choice["stop_reason"] = None
        choice["token_ids"] = None
        return {**head, "choices": [choice]}

    assistant = {"role": "assistant", "content": ""}
    role = {"index": 0, "delta": assistant, "logprobs": None, "finish_reason": None}
    yield {**head, "choices": [role], "prompt_token_ids": None, "prompt_text": None}, False
    deltas: list[tuple[dict, str | None]] = [({"reasoning": p}, None) for p in reply.reasoning]
    deltas += [({"content": p}, None) for p in reply.content]
    deltas += list(_tool_call_deltas(reply, info))
    finish = next((f for _, f in reversed(deltas) if f), reply.finish_reason)
    separate = bool(reply.tool_calls) or not deltas
    last: dict | None = None
    for n, (delta, _) in enumerate(deltas):
        if last is not None:
            yield last, True
        last = chunk(delta, None if separate or n < len(deltas) - 1 else finish)
    if separate:
        if last is not None:
            yield last, True
        last = chunk({}, finish)
        counts = False
    else:
        counts = True
    assert last is not None  # set by the loop (deltas) or by the separate finish chunk
    if include_usage:
        yield last, counts
        last, counts = {**head, "choices": [], "usage": reply.usage(details=False)}, False
    yield {**last, "system_fingerprint": versions.active().fingerprint}, counts
