"""OpenAI chat completions and Responses on top of replies.py: request checks, usage, response/chunk shapes.

Public:
  ServingInfo               what a request needs to know about the server (names, max_model_len, parsers)
  RequestError.to_json()    vLLM-style {"error": {"message", "type", "param", "code"}}
  plan_chat(body, info) -> Reply          decide reasoning/content/tool calls and apply max_tokens
  chat_completion(reply, ...) -> dict     `chat.completion`
  chat_chunks(reply, ...) -> iterator of (chunk dict, counts_as_token: bool)   `chat.completion.chunk`s
  response_object(body, info, ...) -> (dict, Reply)   minimal `/v1/responses` object
Behaviour notes: `tool_choice: auto` needs --enable-auto-tool-choice and --tool-call-parser (400 otherwise,
as in vLLM); without --reasoning-parser a thinking request gets its reasoning inline as <think>…</think>
in `content`, as a real server without the parser would return it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from composegen.emulator import replies
from composegen.emulator.tokenizer import encode_chat, pieces

TOOL_CALL_OVERHEAD = 2  # tokens for the call markup around name + arguments


@dataclass
class ServingInfo:
    model: str
    served_names: list[str]
    max_model_len: int
    auto_tool_choice: bool = False
    tool_parser: str | None = None
    reasoning_parser: str | None = None
    fault: str | None = None

    @property
    def name(self) -> str:
        return self.served_names[0]


class RequestError(Exception):
    def __init__(self, status: int, message: str, err_type: str = "BadRequestError", param: str | None = None):
        super().__init__(message)
        self.status, self.message, self.err_type, self.param = status, message, err_type, param

    def to_json(self) -> dict:
        return {"error": {"message": self.message, "type": self.err_type, "param": self.param, "code": self.status}}


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

    def usage(self) -> dict:
        usage = {
            "prompt_tokens": self.prompt_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "completion_tokens": self.completion_tokens,
            "prompt_tokens_details": None,
        }
        if self.reasoning:
            usage["completion_tokens_details"] = {"reasoning_tokens": len(self.reasoning)}
        return usage


def check_model(body: dict, info: ServingInfo) -> None:
    wanted = body.get("model")
    if wanted and wanted not in info.served_names:
        raise RequestError(404, f"The model `{wanted}` does not exist.", "NotFoundError", "model")


def _budget(body: dict, prompt_tokens: int, info: ServingInfo) -> int:
    limit = info.max_model_len
    if prompt_tokens > limit:
        raise RequestError(
            400,
            f"This model's maximum context length is {limit} tokens. However, your request "
            f"has {prompt_tokens} input tokens. Please reduce the length of the input messages.",
            param="messages",
        )
    wanted = body.get("max_completion_tokens") or body.get("max_tokens") or body.get("max_output_tokens")
    if wanted is None:
        return limit - prompt_tokens
    if not isinstance(wanted, int) or wanted < 1:
        raise RequestError(400, f"max_tokens must be at least 1, got {wanted}.", param="max_tokens")
    if wanted > limit - prompt_tokens:
        raise RequestError(
            400,
            f"'max_tokens' or 'max_completion_tokens' is too large: {wanted}. This model's "
            f"maximum context length is {limit} tokens and your request has {prompt_tokens} "
            f"input tokens ({wanted} > {limit} - {prompt_tokens}).",
            param="max_tokens",
        )
    return wanted


def _call_id(name: str, arguments: str, index: int) -> str:
    return "chatcmpl-tool-" + hashlib.sha256(f"{index}:{name}:{arguments}".encode()).hexdigest()[:24]


def plan_chat(body: dict, info: ServingInfo) -> Reply:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise RequestError(400, "messages: a non-empty list of message objects is required", param="messages")
    check_model(body, info)
    tools = body.get("tools") or []
    tool_choice = body.get("tool_choice", "auto" if tools else "none")
    if tools and tool_choice == "auto" and not (info.auto_tool_choice and info.tool_parser):
        raise RequestError(
            400,
            '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
            param="tool_choice",
        )
    add_prompt = (body.get("chat_template_kwargs") or {}).get("add_generation_prompt", True)
    reply = Reply(prompt_tokens=len(encode_chat(messages, tools, add_prompt)))
    budget = _budget(body, reply.prompt_tokens, info)

    if isinstance(tool_choice, dict) and tools:
        wanted = (tool_choice.get("function") or {}).get("name")
        if not any((t.get("function") or t).get("name") == wanted for t in tools):
            raise RequestError(400, f"Tool '{wanted}' has not been passed in `tools`.", param="tool_choice")
    effort = replies.reasoning_effort(body)
    thinking = pieces(replies.reasoning_text(replies.last_user_text(messages), effort)) if effort else []
    function = replies.choose_tool(tools, tool_choice, messages) if tools else None
    answer = [] if function else pieces(replies.answer_text(messages, body.get("response_format")))
    if thinking and not info.reasoning_parser:
        answer = pieces("<think> " + "".join(thinking) + " </think>") + answer
        thinking = []

    reply.reasoning = thinking[:budget]
    left = budget - len(reply.reasoning)
    if function:
        arguments = replies.tool_arguments(function, messages)
        argument_pieces = pieces(arguments)
        room = max(0, left - TOOL_CALL_OVERHEAD)
        reply.tool_calls = [
            ToolCall(_call_id(function["name"], arguments, 0), function["name"], argument_pieces[:room])
        ]
        reply.finish_reason = "tool_calls" if room >= len(argument_pieces) else "length"
    else:
        reply.content = answer[:left]
        reply.finish_reason = "stop" if left >= len(answer) else "length"
    if len(thinking) > budget:
        reply.finish_reason = "length"
    return reply


def _tool_call_json(call: ToolCall) -> dict:
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}


def chat_completion(reply: Reply, info: ServingInfo, request_id: str, created: int) -> dict:
    message = {
        "role": "assistant",
        "content": None if reply.tool_calls else "".join(reply.content),
        "reasoning_content": "".join(reply.reasoning) or None,
        "tool_calls": [_tool_call_json(c) for c in reply.tool_calls],
    }
    return {
        "id": request_id,
        "object": "chat.completion",
        "created": created,
        "model": info.name,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": reply.finish_reason,
                "stop_reason": None,
            }
        ],
        "usage": reply.usage(),
        "prompt_logprobs": None,
    }


def chat_chunks(reply: Reply, info: ServingInfo, request_id: str, created: int, include_usage: bool):
    """Yield (chunk, counts_as_token). Tool calls stream as id/name first, then argument fragments."""

    def chunk(delta: dict, finish: str | None = None) -> dict:
        return {
            "id": request_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": info.name,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }

    yield chunk({"role": "assistant", "content": ""}), False
    for piece in reply.reasoning:
        yield chunk({"reasoning_content": piece}), True
    for piece in reply.content:
        yield chunk({"content": piece}), True
    finish = reply.finish_reason
    for index, call in enumerate(reply.tool_calls):
        yield (
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": ""},
                        }
                    ]
                }
            ),
            True,
        )
        fragments = list(call.argument_pieces)
        if info.fault == "broken_tool_stream":
            # Garbage like a misconfigured tool parser leaks: JSON never closes, markup in the arguments.
            fragments = fragments[:-1] + ["<|tool▁call▁end|>", ' {"'] if fragments else ['{"']
            finish = "stop"
        for fragment in fragments:
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}), True
    yield chunk({}, finish), False
    if include_usage:
        yield (
            {
                "id": request_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": info.name,
                "choices": [],
                "usage": reply.usage(),
            },
            False,
        )


def _response_messages(body: dict) -> list[dict]:
    messages = []
    if body.get("instructions"):
        messages.append({"role": "system", "content": body["instructions"]})
    items = body.get("input")
    if isinstance(items, str):
        return messages + [{"role": "user", "content": items}]
    if not isinstance(items, list) or not items:
        raise RequestError(400, "input: a string or a non-empty list of items is required", param="input")
    for item in items:
        if isinstance(item, str):
            messages.append({"role": "user", "content": item})
        elif item.get("type") == "function_call_output":
            messages.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": item.get("output")})
        elif item.get("type") == "function_call":
            messages.append(
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": item.get("call_id"),
                            "function": {"name": item.get("name"), "arguments": item.get("arguments", "")},
                        }
                    ],
                }
            )
        else:
            messages.append({"role": item.get("role", "user"), "content": item.get("content")})
    return messages


def response_object(body: dict, info: ServingInfo, response_id: str, created: int) -> tuple[dict, Reply]:
    """A non-streamed Responses API object (text output; reasoning as a `reasoning` item)."""
    if body.get("stream"):
        raise RequestError(
            400, "stream=true is not supported for /v1/responses by the composegen emulator", param="stream"
        )
    text_format = (body.get("text") or {}).get("format") or {}
    chat_body = {
        "model": body.get("model"),
        "messages": _response_messages(body),
        "max_tokens": body.get("max_output_tokens"),
        "reasoning": body.get("reasoning"),
        "response_format": {"type": "json_schema", "json_schema": text_format}
        if text_format.get("type") == "json_schema"
        else text_format or None,
    }
    reply = plan_chat(chat_body, info)
    output = []
    if reply.reasoning:
        output.append(
            {
                "id": f"rs_{response_id[5:]}",
                "type": "reasoning",
                "summary": [],
                "content": [{"type": "reasoning_text", "text": "".join(reply.reasoning)}],
            }
        )
    output.append(
        {
            "id": f"msg_{response_id[5:]}",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "".join(reply.content), "annotations": []}],
        }
    )
    incomplete = reply.finish_reason == "length"
    usage = {
        "input_tokens": reply.prompt_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": reply.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": len(reply.reasoning)},
        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
    }
    return {
        "id": response_id,
        "object": "response",
        "created_at": created,
        "model": info.name,
        "status": "incomplete" if incomplete else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "output": output,
        "usage": usage,
        "max_output_tokens": body.get("max_output_tokens"),
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }, reply
