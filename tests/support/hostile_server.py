"""A real HTTP server on 127.0.0.1 that lies: one path misbehaves, every other path answers like a small
honest vLLM (so a client gets as far as the lie before it meets it).

    with HostileServer.start("/tokenize", "drip") as srv:
        srv.base_url, srv.model

Behaviours (BEHAVIOURS): drip-feeding a body or the headers, a 2 GiB body, silence, a body cut short,
non-JSON, a
100,000-deep document, a list or an empty object for an object, wrong types, an event stream that never
ends, that drips, or whose events are malformed, lists, or of the wrong types, and terminal escapes in
an error text. Handlers stop when the client goes away (a write fails, a read ends).
"""

from __future__ import annotations

import contextlib
import json
import socket
import socketserver
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from tests.support.stub_server import running

MODEL = "m"
HONEST_METRICS = (
    "# TYPE vllm:num_requests_running gauge\n"
    f'vllm:num_requests_running{{model_name="{MODEL}"}} 1\n'
    "# TYPE vllm:num_requests_waiting gauge\n"
    f'vllm:num_requests_waiting{{model_name="{MODEL}"}} 0\n'
)
DRIP_S = 0.05

# What a wrong-typed reply looks like on each path (the keys are there, the types are not).
WRONG_TYPES = {
    "/tokenize": {"count": "7"},
    "/v1/models": {"data": [{"id": 7, "max_model_len": "4096"}]},
    "/v1/chat/completions": {"choices": [{"message": "hi", "finish_reason": 3}]},
    "/v1/responses": {"status": "completed", "output": "READY"},
}
WRONG_CHUNK = {
    "choices": [{"delta": "x", "finish_reason": ["stop"]}],
    "usage": {"prompt_tokens": "9"},
}
ESCAPES = "\x1b]52;c;ZXZpbA==\x07\x1b[2J\x1b[31mred"


def _words(body: dict) -> int:
    messages = body.get("messages") or [{"content": body.get("prompt", "")}]
    return 5 + sum(len(str(m.get("content", "")).split()) for m in messages)


class _Handler(socketserver.StreamRequestHandler):
    server: _Server

    def handle(self) -> None:
        try:
            method, path, body = self._request()
        except (OSError, ValueError):
            return
        target, behaviour = self.server.target, self.server.behaviour
        try:
            if path.split("?")[0] == target:
                self.server.lies += 1
                BEHAVIOURS[behaviour](self, path, body)
            else:
                self._honest(method, path, body)
        except OSError:  # the client went away: the lie worked or was caught
            return

    def _request(self) -> tuple[str, str, dict]:
        method, path, _ = self.rfile.readline(65536).decode("latin-1").split(" ", 2)
        length = 0
        while (line := self.rfile.readline(65536)) not in (b"\r\n", b"\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        raw = self.rfile.read(length) if length else b""
        return method, path, json.loads(raw) if raw else {}

    def head(
        self, status: int = 200, ctype: str = "application/json", length: int | None = None
    ) -> None:
        size = (
            f"Content-Length: {length}\r\n"
            if length is not None
            else "Transfer-Encoding: chunked\r\n"
        )
        text = f"HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\n{size}Connection: close\r\n\r\n"
        self.wfile.write(text.encode())
        self.wfile.flush()

    def send(self, payload: object, status: int = 200, ctype: str = "application/json") -> None:
        raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.head(status, ctype, len(raw))
        self.wfile.write(raw)
        self.wfile.flush()

    def chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _honest(self, method: str, path: str, body: dict) -> None:
        path = path.split("?")[0]
        if path == "/health":
            self.send(b"", ctype="text/plain")
        elif path == "/v1/models":
            self.send(
                {
                    "object": "list",
                    "data": [{"id": MODEL, "object": "model", "max_model_len": 4096}],
                }
            )
        elif path == "/metrics":
            self.send(HONEST_METRICS.encode(), ctype="text/plain")
        elif path == "/tokenize":
            self.send({"count": _words(body), "max_model_len": 4096})
        elif path == "/v1/chat/completions" and body.get("stream"):
            self.head(ctype="text/event-stream")
            for event in _honest_stream(body):
                self.chunk(event)
            self.chunk(b"")
        elif path == "/v1/chat/completions":
            message = {"role": "assistant", "content": "sum(xs)"}
            usage = {
                "prompt_tokens": _words(body),
                "completion_tokens": 2,
                "total_tokens": _words(body) + 2,
            }
            self.send(
                {
                    "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                    "usage": usage,
                }
            )
        else:
            self.send({"error": {"message": f"no route {path}"}}, status=404)

    def drip(self, data: bytes) -> None:
        for i in range(len(data)):
            self.wfile.write(data[i : i + 1])
            self.wfile.flush()
            time.sleep(DRIP_S)


def _honest_stream(body: dict) -> list[bytes]:
    n = int(body.get("max_tokens") or 4)
    events = [
        {"choices": [{"index": 0, "delta": {"content": "w"}, "finish_reason": None}]}
        for _ in range(n)
    ]
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]})
    events.append({"choices": [], "usage": {"prompt_tokens": _words(body), "completion_tokens": n}})
    return [b"data: " + json.dumps(e).encode() + b"\n\n" for e in events] + [b"data: [DONE]\n\n"]


def _drip_body(h: _Handler, path: str, body: dict) -> None:
    h.head(length=10**9, ctype="text/plain" if path == "/metrics" else "application/json")
    while True:
        h.drip(b"x")


def _drip_headers(h: _Handler, path: str, body: dict) -> None:
    h.drip(b"HTTP/1.1 200 OK\r\nX-Slow: ")
    while True:
        h.drip(b"y")


def _huge(h: _Handler, path: str, body: dict) -> None:
    h.head(length=2 * 2**30)  # 2 GiB announced, and sent as fast as the client reads
    block = b"0" * 2**20
    for _ in range(2048):
        h.wfile.write(block)


def _silent(h: _Handler, path: str, body: dict) -> None:
    while h.connection.recv(1024):
        pass


def _stream(events: Callable[[int], bytes], pause: float = 0.0, forever: bool = False):
    def behaviour(h: _Handler, path: str, body: dict) -> None:
        h.head(ctype="text/event-stream")
        i = 0
        while forever or i < 3:
            h.chunk(events(i))
            i += 1
            time.sleep(pause)
        h.chunk(b"data: [DONE]\n\n")
        h.chunk(b"")

    return behaviour


def _json(payload: object):
    return lambda h, path, body: h.send(payload if not callable(payload) else payload(path))


def _stream_drip(h: _Handler, path: str, body: dict) -> None:
    h.head(ctype="text/event-stream", length=10**9)
    event = json.dumps(
        {"choices": [{"index": 0, "delta": {"content": "w"}, "finish_reason": None}]}
    ).encode()
    while True:
        h.drip(b"data: " + event + b"\n\n")


def _cut(h: _Handler, path: str, body: dict) -> None:
    """The honest answer under a Content-Length 64 bytes longer, then the connection closed: a reply
    cut in flight (http.client's read1 ends such a body without a word)."""

    def send(payload: object, status: int = 200, ctype: str = "application/json") -> None:
        raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        h.head(status, ctype, len(raw) + 64)
        h.wfile.write(raw)
        h.wfile.flush()

    h.send = send  # type: ignore[method-assign]
    h._honest("POST", path, body)


def _once_cut(h: _Handler, path: str, body: dict) -> None:
    """The first answer cut short, every later one honest (a drop in flight, not a liar)."""
    if h.server.lies == 1:
        _cut(h, path, body)
    else:
        h._honest("POST", path, body)


_ENDLESS = json.dumps(
    {"choices": [{"index": 0, "delta": {"content": "w"}, "finish_reason": None}]}
).encode()

BEHAVIOURS: dict[str, Callable[[_Handler, str, dict], None]] = {
    "drip": _drip_body,
    "drip_headers": _drip_headers,
    "huge": _huge,
    "silent": _silent,
    "cut": _cut,
    "once_cut": _once_cut,
    "not_json": _json(b"<html>upstream says hello</html>"),
    "deep": _json(b"[" * 100_000),
    "list": _json([1, 2, 3]),
    "missing_keys": _json({}),
    "wrong_types": _json(lambda path: WRONG_TYPES.get(path.split("?")[0], {"x": 1})),
    "hub_wrong_siblings": _json(
        {
            "id": "org/model",
            "sha": "b" * 40,
            "siblings": [{"rfilename": "a.bin", "size": "12", "blobId": ["x"]}],
        }
    ),
    "escapes": lambda h, path, body: h.send(
        f"oops {ESCAPES}".encode(), status=500, ctype="text/plain"
    ),
    "stream_endless": _stream(lambda i: b"data: " + _ENDLESS + b"\n\n", pause=0.01, forever=True),
    "stream_drip": _stream_drip,
    "stream_not_json": _stream(lambda i: b"data: {not json\n\n"),
    "stream_list": _stream(lambda i: b"data: [1, 2]\n\n"),
    "stream_wrong_types": _stream(lambda i: b"data: " + json.dumps(WRONG_CHUNK).encode() + b"\n\n"),
    "stream_huge": _stream(lambda i: b"data: " + b"x" * 2**20 + b"\n\n", forever=True),
}
STREAMS = [b for b in BEHAVIOURS if b.startswith("stream_")]
REPLIES = [
    b for b in BEHAVIOURS if not b.startswith(("stream_", "hub_", "once_")) and b != "escapes"
]


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    target = ""
    behaviour = ""
    lies = 0  # how many times the target path was answered by the behaviour


@dataclass
class HostileServer:
    server: _Server

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    model = MODEL

    @classmethod
    @contextlib.contextmanager
    def start(cls, target: str, behaviour: str) -> Iterator[HostileServer]:
        """Served in a thread until the block ends (`with HostileServer.start(...) as srv:`)."""
        server = _Server(("127.0.0.1", 0), _Handler)
        server.target, server.behaviour = target, behaviour
        with running(server):
            yield cls(server)


def reachable(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0
