"""The model-using endpoints of the emulator's HTTP server (chat, completions, responses): paced
prefill and decode, the metrics of each request, server-sent-event streams, and the client's hang-up.

As vLLM: a client that hangs up ends its request (a non-streamed one too: the real engine stops
generating at once, recorded through the edge in issue 48) and the request counts as aborted; a
/sleep?mode=abort ends it with finish_reason "abort" and HTTP 200."""

from __future__ import annotations

import dataclasses
import json
import select
import socket
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler

from composegen.emulator import completions, responses
from composegen.emulator.chat import chat_chunks, chat_completion, new_id, plan_chat
from composegen.emulator.server_state import ServerState

_CHECK_S = 0.05  # how often a decode looks for a hang-up or an abort


class ClientGone(Exception):
    """The client hung up: nothing more is sent on its connection."""


@dataclasses.dataclass
class _Run:
    completion_tokens: int
    reason: str = "abort"  # until the request ends otherwise


class Generation(BaseHTTPRequestHandler):
    state: ServerState
    _access: Callable[..., None]
    _json: Callable[..., None]
    _body: Callable[[], dict]

    def client_gone(self) -> bool:
        """The client closed its end (a kept-alive client's next request is not a hang-up)."""
        try:
            if not select.select([self.connection], [], [], 0)[0]:
                return False
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    @contextmanager
    def _metered(self, prompt_tokens: int, completion_tokens: int) -> Iterator[_Run]:
        """One request in the metrics: admitted, prefilled, finished with RUN's tokens and reason."""
        state, started = self.state, time.monotonic()
        run = _Run(completion_tokens)
        state.metrics.start(prompt_tokens)
        try:
            time.sleep(state.pacing.prefill(prompt_tokens))
            state.metrics.first_token(time.monotonic() - started)
            yield run
        finally:
            elapsed = time.monotonic() - started
            state.metrics.finish(prompt_tokens, run.completion_tokens, run.reason, elapsed)

    def _decode(self, run: _Run) -> int:
        """Pace RUN's tokens; how many were made before a /sleep abort. A hang-up ends the
        request (aborted, with the tokens made so far)."""
        per_token = self.state.pacing.per_token(run.completion_tokens)
        batch = max(1, int(_CHECK_S / per_token)) if per_token > 0 else run.completion_tokens
        sleep, start = self.state.sleep, time.monotonic()
        for made in range(0, run.completion_tokens, batch):
            if self.client_gone():
                run.completion_tokens = made
                raise ClientGone
            if sleep is not None and sleep.aborted():
                return made
            due = start + min(made + batch, run.completion_tokens) * per_token  # own clock: a
            time.sleep(max(0.0, due - time.monotonic()))  # late wake-up is caught up on, not added
        return run.completion_tokens

    def _chat(self) -> None:
        body = self._body()
        reply = plan_chat(body, self.state.info)
        request_id, created = new_id("chatcmpl-"), int(time.time())
        metrics = self.state.metrics
        with self._metered(reply.prompt_tokens, reply.completion_tokens) as run:
            if body.get("stream"):
                include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
                chunks = chat_chunks(reply, self.state.info, request_id, created, include_usage)
                per_token = self.state.pacing.per_token(reply.completion_tokens)

                def parsed() -> None:
                    metrics.tool_parsed(True, bool(reply.tool_calls), reply.completion_tokens)

                self._stream_events(((None, c, t) for c, t in chunks), per_token, parsed)
            else:
                made = self._decode(run)
                if made < reply.completion_tokens:  # /sleep?mode=abort: a short answer, HTTP 200
                    short = reply.content[:made]
                    reply = dataclasses.replace(
                        reply, reasoning=[], content=short, tool_calls=[], finish_reason="abort"
                    )
                metrics.tool_parsed(False, bool(reply.tool_calls), reply.completion_tokens)
                self._json(200, chat_completion(reply, self.state.info, request_id, created))
            run.reason = reply.finish_reason

    def _completions(self) -> None:
        payload, prompt_tokens, completion_tokens, finish = completions.completion(
            self._body(), self.state.info, int(time.time())
        )
        with self._metered(prompt_tokens, completion_tokens) as run:
            self._decode(run)
            self._json(200, payload)
            run.reason = finish

    def _responses(self) -> None:
        body = self._body()
        reply = responses.plan_response(body, self.state.info)
        response_id, created = new_id("resp_"), int(time.time())
        with self._metered(reply.prompt_tokens, reply.completion_tokens) as run:
            if body.get("stream"):
                events = responses.response_events(
                    body, self.state.info, reply, response_id, created
                )
                per_token = self.state.pacing.per_token(reply.completion_tokens)
                self._stream_events(events, per_token, done=False)
            else:
                self._decode(run)
                payload = responses.response_object(
                    body, self.state.info, reply, response_id, created
                )
                self._json(200, payload)
            run.reason = reply.finish_reason

    def _stream_events(
        self,
        events: Iterable[tuple[str | None, dict, bool]],
        per_token: float,
        before_end: Callable[[], None] | None = None,
        done: bool = True,
    ) -> None:
        """SSE over chunked transfer encoding on a kept-alive connection, as uvicorn sends vLLM's
        streams. `events` yields (event name or None, data, counts_as_token); chat streams end with
        `data: [DONE]`. BEFORE_END runs once every event is out but before the stream ends: what it
        counts is visible to a client that has read the whole stream (a /metrics right after it must
        not race the handler)."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("vary", "Origin")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        self._access(200)
        sleep, start, tokens = self.state.sleep, time.monotonic(), 0
        for event, data, is_token in events:
            if (
                sleep is not None
                and sleep.aborted()
                and data.get("object") == "chat.completion.chunk"
            ):
                self._send_chunk(f"data: {_compact(_aborted_chunk(data))}\n\n")
                break
            if is_token:
                tokens += 1  # paced as _decode: the rate holds on a busy CPU
                time.sleep(max(0.0, start + tokens * per_token - time.monotonic()))
            line = f"data: {_compact(data)}\n\n"
            self._send_chunk(f"event: {event}\n{line}" if event else line)
        if before_end is not None:
            before_end()
        if done:
            self._send_chunk("data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _send_chunk(self, text: str) -> None:
        data = text.encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()


def _compact(data: dict) -> str:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


def _aborted_chunk(data: dict) -> dict:
    """The chunk a /sleep?mode=abort ends a chat stream with."""
    head = {k: data[k] for k in ("id", "object", "created", "model") if k in data}
    finish = {"finish_reason": "abort", "stop_reason": None}
    aborted: dict = {"index": 0, "delta": {}, "logprobs": None, **finish}
    return {**head, "choices": [aborted]}
