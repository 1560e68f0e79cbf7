"""bench's streaming client: one keep-alive HTTP/1.1 connection per worker, parsed in an asyncio
Protocol.

Why not httpx here: on a real server every token arrives in its own TCP segment, and httpx
(httpcore, h11, anyio) spends 0.2–0.3 ms of CPU per streamed event — at concurrency 16 that is the
client, not the server, being measured. This reader runs in the event loop's data callback: it
splits the chunked body and the SSE events of each segment as it arrives (one clock reading per
segment) and json-parses each event once; bench/bench_client.py --paced measures it
(docs/benchmarks.md).

Limits (the server is not trusted): a response head of at most HEAD_CAP bytes, an SSE event of at
most EVENT_CAP, a whole response of at most BODY_CAP, the request's deadline; a malformed head,
chunk size or event, or a broken connection, ends the request with an error (the connection is then
dropped).
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from typing import TypedDict, cast
from urllib.parse import urlsplit

from composegen.bench.prompts import ChatMessage
from composegen.bench.stats import Sample

HEAD_CAP = 64 << 10
EVENT_CAP = 16 << 20
BODY_CAP = 1 << 30
ERROR_CAP = 64 << 10  # bytes of a non-200 body kept for its message


def _api_message(text: str) -> str:
    try:
        doc = json.loads(text)
    except ValueError:
        return text[:200]
    error = doc.get("error") if isinstance(doc, dict) else None
    return str(error.get("message") if isinstance(error, dict) else error or doc)[:200]


class ChatRequest(TypedDict):
    """The streamed chat-completion request a bench sends (the OpenAI wire's body, plus vLLM's
    ignore_eos)."""

    model: str
    messages: list[ChatMessage]
    max_tokens: int
    ignore_eos: bool
    temperature: float
    stream: bool
    stream_options: dict[str, bool]


class WireError(Exception):
    pass


class _Unanswered(WireError):
    """The connection closed before a byte of the response came."""


class _Response:
    """The state of one response on the connection: head, then a chunked or sized body of SSE
    events."""

    def __init__(self, sample: Sample, started: float, max_tokens: int | None) -> None:
        self.sample, self.started, self.max_tokens = sample, started, max_tokens
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.status = 0
        self.chunked = False
        # bytes left of the current chunk (chunked) or of the body (sized); -1: none yet
        self.left = -1
        self.body = 0
        self.events = b""  # SSE text not yet ended by a blank line
        self.error_text = b""
        self.last: float | None = None
        self.usage: object = None
        self.finish: object = None

    def event(self, data: bytes, now: float) -> None:
        """One SSE event of a 200 stream (`data: {...}`)."""
        if data.startswith(b"data: "):
            data = data[6:]
        elif data.startswith(b"data:") or data[:1].isspace():
            data = data.strip().removeprefix(b"data:").strip()
        # the end, or an SSE comment
        if not data or data.startswith(b"[DONE]") or data.startswith(b":"):
            return
        try:
            chunk = json.loads(data)
        except ValueError as exc:
            raise WireError(f"a stream event was not JSON: {exc}") from None
        if not isinstance(chunk, dict):
            raise WireError("a stream event was not a JSON object")
        if chunk.get("error"):  # vLLM reports a failure inside the stream as an error event
            raise WireError(f"stream error: {_api_message(data.decode('utf-8', 'replace'))}")
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        choices = chunk.get("choices") or ()
        for choice in choices if isinstance(choices, list) else ():
            delta = choice.get("delta") if isinstance(choice, dict) else None
            if not isinstance(delta, dict):
                continue
            if delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning"):
                if self.last is None:
                    self.sample.ttft = now - self.started
                else:
                    self.sample.itls.append(now - self.last)
                self.last = now
            self.finish = choice.get("finish_reason") or self.finish

    def text(self, data: bytes, now: float) -> None:
        """Body bytes (already de-chunked)."""
        self.body += len(data)
        if self.body > BODY_CAP:
            raise WireError(f"the response is larger than {BODY_CAP} bytes")
        if self.status != 200:
            self.error_text = (self.error_text + data)[:ERROR_CAP]
            return
        # SSE allows CRLF line ends
        self.events += data.replace(b"\r\n", b"\n") if b"\r" in data else data
        if b"\n\n" not in self.events:
            if len(self.events) > EVENT_CAP:
                raise WireError(f"a stream event is larger than {EVENT_CAP} bytes")
            return
        *complete, self.events = self.events.split(b"\n\n")
        for event in complete:
            self.event(event, now)

    def end(self) -> None:
        sample = self.sample
        if self.status != 200:
            sample.error = (
                f"HTTP {self.status}: {_api_message(self.error_text.decode('utf-8', 'replace'))}"
            )
            return
        if self.events.strip():
            self.event(self.events, time.perf_counter())
        sample.e2el = time.perf_counter() - self.started
        if self.finish is None:
            sample.error = "the stream ended without a finish_reason"
        elif not isinstance(self.usage, dict):
            sample.error = "the stream carried no usage (stream_options.include_usage)"
        else:
            prompt, completion = (
                self.usage.get("prompt_tokens"),
                self.usage.get("completion_tokens"),
            )
            if not all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 0
                for v in (prompt, completion)
            ):
                sample.error = f"the usage's token counts are not counts: {self.usage!r:.120}"
                return
            if self.max_tokens is not None and completion > self.max_tokens:  # type: ignore[operator]
                sample.error = (
                    f"protocol error: usage.completion_tokens {str(completion)[:24]} is beyond the "
                    f"request's max_tokens {self.max_tokens}"
                )
                return
            sample.input_tokens, sample.output_tokens = int(prompt or 0), int(completion or 0)


class _Protocol(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = b""
        self.response: _Response | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        r = self.response
        if r is not None and not r.done.done():
            sized_to_eof = r.status and not r.chunked and r.left < 0
            if sized_to_eof:  # a body that ends with the connection
                self._finish(r)
            elif not r.status and not self.buffer:
                r.done.set_exception(_Unanswered())
            else:
                r.done.set_exception(WireError("the server closed the connection mid-response"))

    def data_received(self, data: bytes) -> None:
        r = self.response
        if r is None or r.done.done():
            # nothing asked: a server talking out of turn is ignored (the next head check fails)
            return
        try:
            now = time.perf_counter()
            if r.chunked and r.left <= 0 and not self.buffer and r.status == 200 and not r.events:
                # the common case on a real server: a segment is one whole chunk holding one whole
                # event
                size_end = data.find(b"\r\n")
                if 0 < size_end <= 8 and data.endswith(b"\n\n\r\n"):
                    try:
                        size = int(data[:size_end], 16)
                    except ValueError:
                        size = -1
                    if size == len(data) - size_end - 4 and size > 0 and data.count(b"\n\n") == 1:
                        r.body += size
                        r.event(data[size_end + 2 : -4], now)
                        return
            self.buffer += data
            self._parse(r, now)
        except WireError as exc:
            r.done.set_exception(exc)
            if self.transport is not None:
                self.transport.close()

    def _parse(self, r: _Response, now: float) -> None:
        if not r.status:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buffer) > HEAD_CAP:
                    raise WireError(f"the response head is larger than {HEAD_CAP} bytes")
                return
            self._head(r, self.buffer[:end].decode("latin-1"))
            self.buffer = self.buffer[end + 4 :]
        if r.chunked:
            self._chunks(r, now)
        elif r.left >= 0:
            take = self.buffer[: r.left]
            self.buffer, r.left = self.buffer[r.left :], r.left - len(take)
            r.text(take, now)
            if r.left == 0:
                self._finish(r)
        else:
            r.text(self.buffer, now)
            self.buffer = b""

    def _head(self, r: _Response, head: str) -> None:
        lines = head.split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise WireError(f"not an HTTP/1.1 response: {lines[0][:80]!r}")
        r.status = int(parts[1])
        for line in lines[1:]:
            name, _, value = line.partition(":")
            name, value = name.strip().lower(), value.strip()
            if name == "transfer-encoding" and "chunked" in value.lower():
                r.chunked = True
            elif name == "content-length":
                if not value.isdigit():
                    raise WireError(f"bad content-length {value[:40]!r}")
                r.left = int(value)
        if not r.chunked and r.left == 0:
            self._finish(r)

    def _chunks(self, r: _Response, now: float) -> None:
        buf = self.buffer
        pos = 0
        while True:
            if r.left <= 0:  # a chunk-size line: `HEX[;ext]\r\n`
                line_end = buf.find(b"\r\n", pos)
                if line_end < 0:
                    if len(buf) - pos > 1024:
                        raise WireError("a chunk-size line is too long")
                    break
                size_text = buf[pos:line_end].split(b";", 1)[0].strip()
                try:
                    size = int(size_text, 16)
                except ValueError:
                    raise WireError(f"bad chunk size {size_text[:20]!r}") from None
                if size == 0:  # the last chunk (trailers, if any, end with an empty line)
                    end = buf.find(b"\r\n", line_end + 2)
                    if end < 0:
                        break
                    self.buffer = buf[end + 2 :]
                    self._finish(r)
                    return
                r.left = size + 2  # the data and its CRLF
                pos = line_end + 2
            take = min(r.left, len(buf) - pos)
            if take <= 0:
                break
            data = min(take, r.left - 2)  # the chunk's data in this segment (its CRLF is not data)
            if data > 0:
                r.text(buf[pos : pos + data], now)
            r.left -= take
            pos += take
        self.buffer = buf[pos:]

    def _finish(self, r: _Response) -> None:
        if not r.done.done():
            try:
                r.end()
            except WireError as exc:
                r.sample.error = str(exc)
            r.done.set_result(None)


def _expire(done: asyncio.Future[None]) -> None:
    if not done.done():
        done.set_exception(TimeoutError())


class StreamClient:
    """POSTs streamed chat completions on one kept-alive connection (reconnecting after a
    failure)."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        timeout: float,
        context: ssl.SSLContext | None = None,
    ) -> None:
        """`context`: how an https server is verified (default: the system's roots; the edge's
        listener: its own CA)."""
        url = urlsplit(base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self.host, self.port = url.hostname, url.port or (443 if url.scheme == "https" else 80)
        https = url.scheme == "https"
        self.ssl = (context or ssl.create_default_context()) if https else None
        self.prefix = url.path.rstrip("/").removesuffix("/v1")
        host = f"[{self.host}]" if ":" in self.host else self.host
        auth = f"Authorization: Bearer {api_key}\r\n" if api_key else ""
        self.head = f"Host: {host}:{self.port}\r\nContent-Type: application/json\r\n{auth}"
        self.timeout = timeout
        self.protocol: _Protocol | None = None

    async def _connection(self) -> _Protocol:
        if self.protocol is None or self.protocol.closed:
            loop = asyncio.get_running_loop()
            _, protocol = await asyncio.wait_for(
                loop.create_connection(_Protocol, self.host, self.port, ssl=self.ssl),
                min(30.0, self.timeout),
            )
            self.protocol = protocol
        return self.protocol

    async def stream(self, path: str, body: ChatRequest, input_tokens: int) -> Sample:
        """One streamed request as a Sample (its error set when it failed)."""
        return await self.send(self.encode(path, body), input_tokens, body.get("max_tokens"))

    def encode(self, path: str, body: ChatRequest) -> bytes:
        """The request's bytes: the same for every client of one server, so an open-loop sender
        encodes ahead of the due time (openloop.py) and the send does no JSON work."""
        payload = json.dumps(body).encode()
        request = f"POST {self.prefix}{path} HTTP/1.1\r\n{self.head}Content-Length: {len(payload)}\r\n\r\n"
        return request.encode("latin-1") + payload

    async def send(self, data: bytes, input_tokens: int, max_tokens: int | None) -> Sample:
        """Send encoded request bytes (asking for at most `max_tokens`: a usage beyond it is a
        protocol error of the request, not a figure). A kept-alive connection the server closed before answering
        (its idle timeout) is replaced and the request sent again, once."""
        for attempt in (1, 2):
            reused = self.protocol is not None and not self.protocol.closed
            started = time.perf_counter()
            sample = Sample(input_tokens=input_tokens, started=started)
            try:
                await self._send(data, _Response(sample, started, max_tokens))
            except _Unanswered:
                self.close()
                if reused and attempt == 1:
                    continue
                sample.error = "request failed: the server closed the connection without answering"
            except WireError as exc:  # what the server sent was wrong: the message says what
                sample.error = sample.error or str(exc)
                self.close()
            except (OSError, TimeoutError) as exc:
                kind = (
                    "timed out" if isinstance(exc, TimeoutError) else f"{type(exc).__name__}: {exc}"
                )
                sample.error = sample.error or f"request failed: {kind}"
                self.close()
            return sample
        raise AssertionError("unreachable")

    async def _send(self, data: bytes, response: _Response) -> None:
        protocol = await self._connection()
        protocol.response, protocol.buffer = response, b""
        assert protocol.transport is not None
        protocol.transport.write(data)
        expire = asyncio.get_running_loop().call_later(self.timeout, _expire, response.done)
        try:
            await response.done
        finally:
            expire.cancel()

    def close(self) -> None:
        if self.protocol is not None and self.protocol.transport is not None:
            self.protocol.transport.close()
        self.protocol = None
