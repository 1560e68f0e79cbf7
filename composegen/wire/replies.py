"""The shape of every reply composegen reads off the wire, checked before any field is used.

A peer is not trusted to be vLLM: a /tokenize reply may hold a string count, a stream chunk may be a
list, `choices` may be missing. Each reply has a small model of exactly the fields composegen reads
(strict types; other keys are allowed and ignored), and `check` turns a mismatch into one
`WireError` line naming the URL and the field, exit 3."""

from __future__ import annotations

import json
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from composegen.wire.http import WireError

Count = Annotated[StrictInt, Field(ge=0, le=2**40)]


class _Wire(BaseModel):
    # defer_build: each reply model is built on its first use (a poll needs one of them; ~15 ms at
    # import)
    model_config = ConfigDict(extra="allow", frozen=True, defer_build=True)


class TokenizeReply(_Wire):
    count: Count


class ModelEntry(_Wire):
    id: StrictStr
    max_model_len: Count | None = None


class ModelsReply(_Wire):
    data: list[ModelEntry]


class Usage(_Wire):
    prompt_tokens: Count | None = None
    completion_tokens: Count | None = None
    total_tokens: Count | None = None


class Function(_Wire):
    name: StrictStr | None = None
    arguments: StrictStr | None = None


class ToolCall(_Wire):
    index: StrictInt | None = None
    id: StrictStr | None = None
    type: StrictStr | None = None
    function: Function | None = None


class Message(_Wire):
    role: StrictStr | None = None
    content: StrictStr | None = None
    reasoning_content: StrictStr | None = None
    reasoning: StrictStr | None = None
    tool_calls: list[ToolCall] | None = None


class Choice(_Wire):
    index: StrictInt | None = None
    message: Message
    finish_reason: StrictStr | None = None


class ChatReply(_Wire):
    choices: list[Choice]
    usage: Usage | None = None


class ChunkChoice(_Wire):
    index: StrictInt | None = None
    delta: Message | None = None
    finish_reason: StrictStr | None = None


class ChatChunk(_Wire):
    choices: list[ChunkChoice] | None = None
    usage: Usage | None = None
    error: Any = None


class OutputContent(_Wire):
    type: StrictStr
    text: StrictStr | None = None


class OutputItem(_Wire):
    type: StrictStr
    content: list[OutputContent] | None = None


class ResponsesReply(_Wire):
    status: StrictStr | None = None
    output: list[OutputItem]
    usage: dict[StrictStr, Any] | None = None


R = TypeVar("R", bound=BaseModel)


def check(model: type[R], body: bytes | str, url: str) -> R:
    """The reply `body` as `model`, or a WireError naming `url` and the first wrong field."""
    try:
        doc = json.loads(body)
    except RecursionError:  # the C decoder counts its depth: a 100,000-deep reply ends here
        raise WireError(f"{url}: the reply nests too deep to read; refused") from None
    except ValueError as exc:
        raise WireError(f"{url}: the reply is not JSON ({str(exc)[:120]})") from None
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        raise WireError(f"{url}: the reply is not a {_what(model)}: {_first(exc)}") from None


def _what(model: type[BaseModel]) -> str:
    return {
        TokenizeReply: "/tokenize reply",
        ModelsReply: "/v1/models listing",
        ChatReply: "chat completion",
        ChatChunk: "chat completion chunk",
        ResponsesReply: "Responses API reply",
    }.get(model, model.__name__)


def _first(exc: ValidationError) -> str:
    e = exc.errors(include_url=False)[0]
    where = ".".join(str(p) for p in e["loc"]) or "(root)"
    got = e.get("input")
    shown = type(got).__name__ if isinstance(got, dict | list) else repr(got)[:40]
    return f"{where}: {e['msg'].lower()} (got {shown})"
