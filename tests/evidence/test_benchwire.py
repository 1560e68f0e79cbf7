"""bench's own streaming client (composegen/bench/stream.py) over real TCP against canned responses:
any segmentation of the same bytes gives the same sample, keep-alive reuse, and every malformed or hostile
response (bad head, bad chunk size, an event over the cap, a hang, a cut connection) is an error, never a
crash or a hang."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time

import pytest

from composegen.bench import stream


def _event(
    delta: dict | None = None, finish: str | None = None, usage: dict | None = None
) -> bytes:
    data: dict = {
        "choices": [] if usage else [{"index": 0, "delta": delta or {}, "finish_reason": finish}]
    }
    if usage:
        data["usage"] = usage
    return b"data: " + json.dumps(data).encode() + b"\n\n"


def _chunked(*events: bytes) -> bytes:
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    )
    body = b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events)
    return head + body + b"0\r\n\r\n"


GOOD = _chunked(
    _event({"role": "assistant", "content": ""}),
    _event({"content": " a"}),
    _event({"content": " b"}),
    _event({"content": " c"}, finish="length"),
    _event(usage={"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}),
    b"data: [DONE]\n\n",
)


class Canned:
    """A loopback server answering every request with `reply`, written in pieces of `step` bytes."""

    def __init__(
        self, reply: bytes, step: int = 0, close: bool = False, hang: bool = False
    ) -> None:
        self.reply, self.step, self.close, self.hang = reply, step, close, hang
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.requests = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._conn, args=(conn,), daemon=True).start()

    def _conn(self, conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with conn:
            buf = b""
            while True:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, _, buf = buf.partition(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                while len(buf) < length:
                    buf += conn.recv(65536)
                buf = buf[length:]
                self.requests += 1
                if self.hang:
                    time.sleep(5)
                    return
                step = self.step or len(self.reply)
                for i in range(0, len(self.reply), step):
                    conn.sendall(self.reply[i : i + step])
                    if self.step:
                        time.sleep(0.0005)
                if self.close:
                    return

    def stream(self, times: int = 1, timeout: float = 10):
        async def run():
            client = stream.StreamClient(f"http://127.0.0.1:{self.port}/v1", "sk-x", timeout)
            try:
                return [
                    await client.stream("/v1/chat/completions", {"model": "m"}, 7)
                    for _ in range(times)
                ]
            finally:
                client.close()

        return asyncio.run(run())


@pytest.mark.parametrize("step", [0, 1, 3, 17, 64])
def test_any_segmentation_gives_the_same_sample(step):
    server = Canned(GOOD, step=step)
    [sample] = server.stream()
    assert sample.error is None
    assert (sample.input_tokens, sample.output_tokens, len(sample.itls)) == (7, 3, 2)
    assert sample.ttft is not None and sample.e2el is not None and sample.e2el >= sample.ttft


def test_a_kept_alive_connection_serves_request_after_request():
    server = Canned(GOOD)
    samples = server.stream(times=5)
    assert [s.error for s in samples] == [None] * 5 and server.requests == 5


def test_a_server_that_closes_after_each_reply_is_reconnected():
    server = Canned(GOOD, close=True)
    samples = server.stream(times=3)
    assert [s.error for s in samples] == [None] * 3 and server.requests == 3


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 33\r\n\r\n"
            + b'{"error": {"message": "too long"}}'[:33],
            "HTTP 400",
        ),
        (b"SSH-2.0-OpenSSH\r\n\r\n", "not an HTTP/1.1 response"),
        (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n", "bad chunk size"),
        (b"HTTP/1.1 200 OK\r\ncontent-length: x\r\n\r\n", "bad content-length"),
        (b"HTTP/1.1 200 OK\r\n" + b"x-pad: " + b"y" * (70 << 10), "response head is larger"),
        (_chunked(b"data: {not json}\n\n"), "a stream event was not JSON"),
        (_chunked(b"data: [1, 2]\n\n"), "not a JSON object"),
        (_chunked(_event({"content": "a"}, finish="stop")), "no usage"),
        (_chunked(_event({"content": "a"})), "without a finish_reason"),
        (
            _chunked(
                _event({"content": "a"}, "stop"),
                _event(usage={"prompt_tokens": "7", "completion_tokens": 1}),
            ),
            "token counts are not counts",
        ),
        (GOOD[: len(GOOD) // 2], "closed the connection mid-response"),
    ],
)
def test_a_malformed_response_is_an_error(reply, error):
    server = Canned(reply, close=True)
    [sample] = server.stream()
    assert sample.error is not None and error in sample.error


def test_an_event_over_the_cap_is_refused(monkeypatch):
    monkeypatch.setattr(stream, "EVENT_CAP", 1000)
    server = Canned(_chunked(b"data: " + b"x" * 5000))
    [sample] = server.stream()
    assert sample.error is not None and "larger than 1000 bytes" in sample.error


def test_a_hanging_server_times_out():
    server = Canned(GOOD, hang=True)
    started = time.monotonic()
    [sample] = server.stream(timeout=0.5)
    assert sample.error == "request failed: timed out" and time.monotonic() - started < 3


@pytest.mark.parametrize("claimed", [10**30, 10**400, 5])
def test_a_usage_beyond_max_tokens_is_a_protocol_error_of_that_request(claimed):
    """A server claiming more completion tokens than the request allowed (10^30 for a 4-token
    answer read as 3e31 tok/s; 10^400 an OverflowError) fails that request, with the reason."""
    usage = {"prompt_tokens": 7, "completion_tokens": claimed, "total_tokens": 7}
    reply = _chunked(_event({"content": " a"}, finish="length"), _event(usage=usage))
    server = Canned(reply)

    async def run():
        client = stream.StreamClient(f"http://127.0.0.1:{server.port}/v1", None, 10)
        try:
            return await client.stream("/v1/chat/completions", {"model": "m", "max_tokens": 4}, 7)  # type: ignore[typeddict-item]
        finally:
            client.close()

    sample = asyncio.run(run())
    assert sample.error is not None and "beyond the request's max_tokens 4" in sample.error
    assert sample.output_tokens == 0 and str(claimed)[:24] in sample.error
