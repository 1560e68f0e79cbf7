"""The bounded reader as an httpx transport, so clients built on httpx (openai, the /tokenize
client) read through the same deadline, cap and reply checks as everything else.

Each request gets one total deadline (the client's timeout) from the first byte sent to the last
byte read, streamed or not. Replies to the OpenAI-compatible paths composegen reads are checked
against their model in `replies` before the client sees them: a JSON body whole, a server-sent-event
stream event by event. Compressed replies are not asked for (the cap counts the bytes that arrive).
The openai client is built on a fork (`httpx2`) with the same API: `client(..., http=module)` builds
the transport for either."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import ExitStack
from types import ModuleType
from typing import Any

from pydantic import BaseModel

from composegen.wire import replies
from composegen.wire.http import API_REPLY, SMALL_REPLY, STREAM_REPLY, Peer, Streaming

_HOP_HEADERS = {"transfer-encoding", "content-encoding", "content-length", "connection"}


def reply_model(method: str, path: str, streamed: bool) -> type[BaseModel] | None:
    """The model a 200 reply to this request must match (None: composegen reads nothing of it)."""
    path = path.split("?", 1)[0].rstrip("/")
    if path.endswith("/tokenize"):
        return replies.TokenizeReply
    if path.endswith("/v1/models") and method == "GET":
        return replies.ModelsReply
    if path.endswith("/chat/completions"):
        return replies.ChatChunk if streamed else replies.ChatReply
    if path.endswith("/v1/responses"):
        return replies.ResponsesReply
    return None


class BoundedTransport:
    """An httpx (or httpx2) transport: `handle_request` is all either client calls."""

    def __init__(self, deadline_s: float, http: ModuleType) -> None:
        self.deadline_s, self.http = deadline_s, http

    def close(self) -> None:
        pass

    def handle_request(self, request: Any) -> Any:
        url = request.url
        peer = Peer(url.host, url.port or 80)
        path = url.raw_path.decode("ascii", "replace")
        headers = {
            k: v
            for k, v in request.headers.items()
            if k.lower() not in ("accept-encoding", "connection")
        }
        stack = ExitStack()
        try:
            reply = stack.enter_context(
                peer.open(
                    request.method,
                    path,
                    request.read(),
                    deadline_s=self.deadline_s,
                    cap=STREAM_REPLY,
                    headers=headers,
                )
            )
            kept = [(k, v) for k, v in reply.headers if k.lower() not in _HOP_HEADERS]
            streamed = reply.content_type.split(";")[0].strip().lower() == "text/event-stream"
            model = reply_model(request.method, path, streamed) if reply.status == 200 else None
            if streamed:  # the connection stays open until the client closes the response
                events = _events_class(self.http)(reply, model, stack.pop_all())
                return self.http.Response(
                    reply.status, headers=kept, stream=events, request=request
                )
            reply.cap = API_REPLY if reply.status == 200 else SMALL_REPLY
            body = reply.read()
        finally:
            stack.close()
        if model is not None:
            replies.check(model, body, reply.url)
        return self.http.Response(reply.status, headers=kept, content=body, request=request)


class _Events:
    """A server-sent-event body passed through piece by piece, each complete `data:` event
    checked."""

    def __init__(self, reply: Streaming, model: type[BaseModel] | None, stack: ExitStack) -> None:
        self.reply, self.model, self.stack = reply, model, stack

    def __iter__(self) -> Iterator[bytes]:
        pending = bytearray()
        for piece in self.reply.chunks():
            if self.model is not None:
                pending += piece.replace(b"\r", b"")
                self._check_events(pending)
            yield piece

    def _check_events(self, pending: bytearray) -> None:
        start = 0
        while (end := pending.find(b"\n\n", start)) >= 0:
            event = bytes(pending[start:end])
            start = end + 2
            data = b"\n".join(
                line[5:].strip() for line in event.split(b"\n") if line.startswith(b"data:")
            )
            if data and data != b"[DONE]" and self.model is not None:
                replies.check(self.model, data, self.reply.url)
        del pending[:start]

    def close(self) -> None:
        self.stack.close()


@functools.cache
def _events_class(http: ModuleType) -> type[_Events]:
    # the client asserts its own stream type
    return type("Events", (_Events, http.SyncByteStream), {})


def client(
    base_url: str, headers: dict[str, str], deadline_s: float, http: ModuleType | None = None
) -> Any:
    """An httpx.Client (or `http`.Client) whose every request reads through BoundedTransport."""
    # why: gates and the ladder import transport; httpx loads only when a client is made
    import httpx

    module = http or httpx
    bounded = BoundedTransport(deadline_s, module)
    return module.Client(base_url=base_url, headers=headers, transport=bounded, timeout=None)
