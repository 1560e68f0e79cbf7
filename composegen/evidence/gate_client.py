"""The gates' OpenAI client: connecting through wire.transport, checking the model is served, the
per-run context whose chat() every gate calls, an API error's message."""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

from composegen.errors import BadInput, EngineError
from composegen.evidence.gate_checks import GateFailed
from composegen.wire.http import wire_cause

# An openai.OpenAI client, held as Any: its overloads type messages as TypedDicts, ours are plain
# dicts.
Client = Any


def client_for(base_url: str, api_key: str | None, timeout: float) -> Client:
    """An OpenAI client reading through wire.transport: `timeout` is each request's total deadline,
    replies are size-capped and checked against wire.replies before a field is read."""
    from openai import OpenAI  # lazy: only gate/ladder/qualify need the client

    from composegen.wire import transport  # why: httpx, +22 ms measured; compare/plan never need it

    url = base_url.rstrip("/").removesuffix("/v1") + "/v1"
    http = transport.client(url, {}, timeout, http=openai_http())
    return OpenAI(
        base_url=url, api_key=api_key or "EMPTY", timeout=timeout, max_retries=0, http_client=http
    )


def openai_http() -> ModuleType:
    """The httpx openai itself is built on: `httpx` up to openai 2.x, the `httpx2` fork from 3.x (a
    dependency of openai's, never named by composegen)."""
    from openai import DefaultHttpxClient

    return sys.modules[DefaultHttpxClient.__mro__[1].__module__.partition(".")[0]]


def check_served(client: Client, base_url: str, model: str) -> None:
    import openai

    try:
        served = [m.id for m in client.models.list().data]
    except openai.AuthenticationError:
        raise BadInput(f"{base_url}: api key: rejected (401)", hint="export VLLM_API_KEY") from None
    except openai.APIError as exc:  # refused connection, timeout, 5xx: the server is not serving
        if lied := wire_cause(exc):
            raise lied from None
        raise EngineError(f"{base_url}/v1/models: cannot list models ({exc})") from None
    if model not in served:
        msg = f"{base_url}: model {model!r} is not served (it serves: {', '.join(served) or 'nothing'})"
        raise EngineError(msg)


class GateContext:
    def __init__(
        self,
        client: Client,
        model: str,
        n_tools: int,
        max_tokens: int,
        reasoning_effort: str | None,
        reference: list[str] | None = None,
    ):
        self.client, self.model, self.n_tools, self.max_tokens = client, model, n_tools, max_tokens
        self.reference = reference  # the equivalence gate's: the control's answers ([]: none yet)
        self.extra = {"reasoning_effort": reasoning_effort} if reasoning_effort else {}

    def chat(
        self, messages: list[dict], allow_length: bool = False, **kwargs: Any
    ) -> tuple[Any, Any]:
        resp = self.client.chat.completions.create(
            model=self.model,
            messages=messages,
            max_tokens=self.max_tokens,
            temperature=0,
            **self.extra,
            **kwargs,
        )
        if not resp.choices:
            raise GateFailed("the response has no choices")
        choice = resp.choices[0]
        if choice.finish_reason == "length" and not allow_length:
            raise GateFailed(f"finish_reason length (max_tokens {self.max_tokens} ran out)")
        return choice, resp


def api_message(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        return str(err.get("message", err) if isinstance(err, dict) else err)[:300]
    return str(exc)[:300]
