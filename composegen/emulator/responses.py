"""The Responses API (`/v1/responses`) on top of chat.plan_chat: the response object and its SSE
stream.

Shapes as a real vLLM 0.26.0 server returns them (tests/data/real-0.26.0-h200): the object carries
every field vLLM sets (most null); a stream is `event: <type>` + `data: <json>` pairs from
`response.created` to `response.completed`, with `sequence_number`s and no `[DONE]`.
"""

from __future__ import annotations

from collections.abc import Iterator

from composegen.emulator.chat import Reply, RequestError, ServingInfo, new_id, plan_chat


def _response_messages(body: dict) -> list[dict]:
    messages = []
    if body.get("instructions"):
        messages.append({"role": "system", "content": body["instructions"]})
    items = body.get("input")
    if isinstance(items, str):
        return [*messages, {"role": "user", "content": items}]
    if not isinstance(items, list) or not items:
        raise RequestError(
            400, "input: a string or a non-empty list of items is required", param="input"
        )
    for item in items:
        if isinstance(item, str):
            messages.append({"role": "user", "content": item})
        elif item.get("type") == "function_call_output":
            messages.append(
                {"role": "tool", "tool_call_id": item.get("call_id"), "content": item.get("output")}
            )
        elif item.get("type") == "function_call":
            messages.append(
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": item.get("call_id"),
                            "function": {
                                "name": item.get("name"),
                                "arguments": item.get("arguments", ""),
                            },
                        }
                    ],
                }
            )
        else:
            messages.append({"role": item.get("role", "user"), "content": item.get("content")})
    return messages


def plan_response(body: dict, info: ServingInfo) -> Reply:
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
    return plan_chat(chat_body, info)


def _text_part(text: str, logprobs: list | None) -> dict:
    return {"annotations": [], "text": text, "type": "output_text", "logprobs": logprobs}


def _message_item(item_id: str, text: str, status: str) -> dict:
    content = [_text_part(text, None)] if status == "completed" else []
    return {
        "id": item_id,
        "content": content,
        "role": "assistant",
        "status": status,
        "type": "message",
        "phase": None,
    }


def response_object(
    body: dict, info: ServingInfo, reply: Reply, response_id: str, created: int, done: bool = True
) -> dict:
    """The response object: `in_progress` with no output while streaming starts, else the finished
    one."""
    output = []
    if done and reply.reasoning:
        output.append(
            {
                "id": new_id("rs_"),
                "type": "reasoning",
                "summary": [],
                "content": [{"type": "reasoning_text", "text": "".join(reply.reasoning)}],
            }
        )
    if done:
        output.append(_message_item(new_id("msg_"), "".join(reply.content), "completed"))
    incomplete = done and reply.finish_reason == "length"
    usage = {
        "input_tokens": reply.prompt_tokens,
        "input_tokens_details": {
            "cached_tokens": 0,
            "input_tokens_per_turn": [],
            "cached_tokens_per_turn": [],
        },
        "output_tokens": reply.completion_tokens,
        "output_tokens_details": {
            "reasoning_tokens": len(reply.reasoning),
            "tool_output_tokens": 0,
            "output_tokens_per_turn": [],
            "tool_output_tokens_per_turn": [],
        },
        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
    }
    return {
        "id": response_id,
        "created_at": created,
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "instructions": body.get("instructions"),
        "metadata": body.get("metadata"),
        "model": info.name,
        "object": "response",
        "output": output,
        "parallel_tool_calls": True,
        "temperature": float(body.get("temperature", 1.0)),
        "tool_choice": body.get("tool_choice", "none"),
        "tools": [],
        "top_p": float(body.get("top_p", 1.0)),
        "background": False,
        "max_output_tokens": body.get("max_output_tokens"),
        "max_tool_calls": None,
        "previous_response_id": body.get("previous_response_id"),
        "prompt": None,
        "reasoning": body.get("reasoning"),
        "service_tier": "auto",
        "status": ("incomplete" if incomplete else "completed") if done else "in_progress",
        "text": None,
        "top_logprobs": None,
        "truncation": "disabled",
        "usage": usage if done else None,
        "user": None,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "kv_transfer_params": None,
        "ec_transfer_params": None,
        "input_messages": None,
        "output_messages": None,
    }


def response_events(
    body: dict, info: ServingInfo, reply: Reply, response_id: str, created: int
) -> Iterator[tuple[str, dict, bool]]:
    """Yield (event type, data, counts_as_token) for a streamed response (text output)."""
    item_id = new_id("")  # the streamed item's id has no `msg_` prefix in vLLM 0.26
    text = "".join(reply.content)
    events: list[tuple[str, dict, bool]] = [
        (
            "response.created",
            {"response": response_object(body, info, reply, response_id, created, False)},
            False,
        ),
        (
            "response.in_progress",
            {"response": response_object(body, info, reply, response_id, created, False)},
            False,
        ),
        (
            "response.output_item.added",
            {"item": _message_item(item_id, "", "in_progress"), "output_index": 0},
            False,
        ),
        (
            "response.content_part.added",
            {"content_index": 0, "item_id": item_id, "output_index": 0, "part": _text_part("", [])},
            False,
        ),
    ]
    for piece in reply.content:
        delta = {
            "content_index": 0,
            "delta": piece,
            "item_id": item_id,
            "logprobs": [],
            "output_index": 0,
        }
        events.append(("response.output_text.delta", delta, True))
    done = {"content_index": 0, "item_id": item_id, "logprobs": [], "output_index": 0, "text": text}
    events.append(("response.output_text.done", done, False))
    part = {
        "content_index": 0,
        "item_id": item_id,
        "output_index": 0,
        "part": _text_part(text, None),
    }
    events.append(("response.content_part.done", part, False))
    item = {**_message_item(item_id, text, "completed"), "summary": []}
    events.append(("response.output_item.done", {"item": item, "output_index": 0}, False))
    final = response_object(body, info, reply, response_id, created)
    events.append(("response.completed", {"response": final}, False))
    for number, (kind, data, counts) in enumerate(events):
        yield kind, {**data, "sequence_number": number, "type": kind}, counts
