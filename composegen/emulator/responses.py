"""The Responses API (`/v1/responses`) on top of chat.plan_chat: the response object and its SSE
stream.

Shapes as a real vLLM 0.26.0 server returns them (tests/data/real-0.26.0-h200): the object carries
every field vLLM sets (most null); a stream is `event: <type>` + `data: <json>` pairs from
`response.created` to `response.completed`, with `sequence_number`s and no `[DONE]`."""

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


_UNSET = {  # the fields vLLM 0.26 sends with fixed values (the recording)
    "parallel_tool_calls": True,
    "tools": [],
    "background": False,
    "max_tool_calls": None,
    "prompt": None,
    "service_tier": "auto",
    "text": None,
    "top_logprobs": None,
    "truncation": "disabled",
    "user": None,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "kv_transfer_params": None,
    "ec_transfer_params": None,
    "input_messages": None,
    "output_messages": None,
}


def _usage(reply: Reply) -> dict:
    per_turn: dict[str, list] = {"input_tokens_per_turn": [], "cached_tokens_per_turn": []}
    return {
        "input_tokens": reply.prompt_tokens,
        "input_tokens_details": {"cached_tokens": 0, **per_turn},
        "output_tokens": reply.completion_tokens,
        "output_tokens_details": {
            "reasoning_tokens": len(reply.reasoning),
            "tool_output_tokens": 0,
            "output_tokens_per_turn": [],
            "tool_output_tokens_per_turn": [],
        },
        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
    }


def response_object(
    body: dict, info: ServingInfo, reply: Reply, response_id: str, created: int, done: bool = True
) -> dict:
    """The response object: `in_progress` with no output while streaming starts, else the finished
    one."""
    output = []
    if done and reply.reasoning:
        reasoning = [{"type": "reasoning_text", "text": "".join(reply.reasoning)}]
        output.append(
            {"id": new_id("rs_"), "type": "reasoning", "summary": [], "content": reasoning}
        )
    if done:
        output.append(_message_item(new_id("msg_"), "".join(reply.content), "completed"))
    incomplete = done and reply.finish_reason == "length"
    return {
        "id": response_id,
        "created_at": created,
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        **{key: body.get(key) for key in ("instructions", "metadata")},
        "model": info.name,
        "object": "response",
        "output": output,
        "temperature": float(body.get("temperature", 1.0)),
        "tool_choice": body.get("tool_choice", "none"),
        "top_p": float(body.get("top_p", 1.0)),
        **{
            key: body.get(key) for key in ("max_output_tokens", "previous_response_id", "reasoning")
        },
        "status": ("incomplete" if incomplete else "completed") if done else "in_progress",
        "usage": _usage(reply) if done else None,
        **_UNSET,
    }


def response_events(
    body: dict, info: ServingInfo, reply: Reply, response_id: str, created: int
) -> Iterator[tuple[str, dict, bool]]:
    """Yield (event type, data, counts_as_token) for a streamed response (text output)."""
    item_id = new_id("")  # the streamed item's id has no `msg_` prefix in vLLM 0.26
    text, at = "".join(reply.content), {"content_index": 0, "item_id": item_id, "output_index": 0}
    started = {"response": response_object(body, info, reply, response_id, created, False)}
    added = {"item": _message_item(item_id, "", "in_progress"), "output_index": 0}
    item = {"item": {**_message_item(item_id, text, "completed"), "summary": []}, "output_index": 0}
    events: list[tuple[str, dict, bool]] = [
        ("created", started, False),
        ("in_progress", started, False),
        ("output_item.added", added, False),
        ("content_part.added", {**at, "part": _text_part("", [])}, False),
        *(("output_text.delta", {**at, "delta": p, "logprobs": []}, True) for p in reply.content),
        ("output_text.done", {**at, "logprobs": [], "text": text}, False),
        ("content_part.done", {**at, "part": _text_part(text, None)}, False),
        ("output_item.done", item, False),
        (
            "completed",
            {"response": response_object(body, info, reply, response_id, created)},
            False,
        ),
    ]
    for number, (kind, data, counts) in enumerate(events):
        yield (
            f"response.{kind}",
            {**data, "sequence_number": number, "type": f"response.{kind}"},
            counts,
        )
