"""Every HTTP read from a peer goes through here: a total deadline and a size cap, whatever the peer
does.

A peer may drip one byte a second (each read arrives inside any per-read timeout, the reply never
ends), send a 2 GiB body, or a stream that never stops. The socket below carries the deadline
itself: before every recv its timeout is set to what is left of the exchange, so no loop inside
http.client (status line, headers, chunked framing) can outlive it. Bodies are read up to the cap
and refused beyond it. A body goes out as `Content-Type: application/json` unless the caller
says otherwise. Failures are `WireError` (exit 3, one line naming the URL); `PeerUnreachable`
is the kind a poller may keep waiting through (refused, reset, nothing listening yet, no reply in
time)."""

from __future__ import annotations

import http.client
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from composegen.errors import EngineError

if TYPE_CHECKING:  # typeshed's buffer protocols, for the socket overrides
    from _typeshed import ReadableBuffer, WriteableBuffer

MIB = 2**20
SMALL_REPLY = 4 * MIB  # /health, /v1/models, /tokenize, error bodies
METRICS_REPLY = 32 * MIB  # a /metrics page (a busy engine with many LoRA adapters is a few MiB)
API_REPLY = 32 * MIB  # a non-streamed completion or response
STREAM_REPLY = 256 * MIB  # everything one streamed completion may send
READ_SIZE = 64 * 1024
# What every body composegen sends is, and says it is: vLLM's model routes answer 400 to a POST
# without it (a real 0.26.0 refused the standby switch's warm-up so, issue 48).
JSON_TYPE = "application/json"


class WireError(EngineError):
    """A peer's reply could not be used: too slow, too large, malformed or of the wrong shape."""


class CutShort(WireError):
    """The connection closed before the body its Content-Length announced: an idempotent read may
    ask again."""


class PeerUnreachable(WireError):
    """Nothing answered in time: refused, reset, closed before a status line, or the deadline passed
    (a poller waits through these; a reply too large or of the wrong shape is a plain WireError)."""


class _DeadlineSocket(socket.socket):
    """A socket whose every blocking call times out at one absolute deadline."""

    deadline = 0.0

    def _arm(self) -> None:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("deadline passed")
        self.settimeout(left)

    def recv_into(self, buffer: WriteableBuffer, nbytes: int = 0, flags: int = 0) -> int:
        self._arm()
        return super().recv_into(buffer, nbytes, flags)

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        self._arm()
        return super().recv(bufsize, flags)

    def sendall(self, data: ReadableBuffer, flags: int = 0) -> None:
        self._arm()
        return super().sendall(data, flags)


class _Connection(http.client.HTTPConnection):
    def __init__(self, host: str, port: int, deadline: float):
        super().__init__(host, port, timeout=max(0.001, deadline - time.monotonic()))
        self.deadline = deadline

    def connect(self) -> None:
        err: OSError | None = None
        found = socket.getaddrinfo(self.host, self.port, 0, socket.SOCK_STREAM)
        for family, kind, proto, _, address in found:
            sock = _DeadlineSocket(family, kind, proto)
            sock.deadline = self.deadline
            try:
                sock._arm()
                sock.connect(address)
            except OSError as exc:
                sock.close()
                err = exc
                continue
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.sock = sock
            return
        raise err or OSError(f"cannot resolve {self.host}")


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes
    content_type: str = ""


@dataclass
class Streaming:
    """An open reply: `status`, and `chunks()` yielding its body pieces within the deadline and
    cap."""

    url: str
    status: int
    content_type: str
    _resp: http.client.HTTPResponse
    _deadline_s: float
    cap: int
    received: int = field(default=0)

    @property
    def headers(self) -> list[tuple[str, str]]:
        return self._resp.getheaders()

    def chunks(self) -> Iterator[bytes]:
        while True:
            try:
                piece = self._resp.read1(READ_SIZE)
            except (OSError, http.client.HTTPException) as exc:
                raise _failure(self.url, exc, self._deadline_s) from None
            if not piece:
                # http.client's read1 ends a Content-Length body early without a word when the
                # peer hangs up: a cut reply would read as a whole (shorter) one
                short = self._resp.length
                if short:
                    ended = f"the reply ended {short} bytes short of its Content-Length"
                    closed = f"(after {self.received}): the connection was closed"
                    raise CutShort(f"{self.url}: {ended} {closed}")
                return
            self.received += len(piece)
            if self.received > self.cap:
                raise WireError(f"{self.url}: the reply is larger than {_size(self.cap)}; refused")
            yield piece

    def read(self) -> bytes:
        return b"".join(self.chunks())


@dataclass(frozen=True)
class Peer:
    """One HTTP server (host, port) and the headers every request carries (an API key)."""

    host: str
    port: int
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @contextmanager
    def open(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        *,
        deadline_s: float,
        cap: int,
        headers: dict[str, str] | None = None,
    ) -> Iterator[Streaming]:
        url = self.base_url + path
        conn = _Connection(self.host, self.port, time.monotonic() + deadline_s)
        try:
            try:
                # the cap counts real bytes
                sent = {**self.headers, **(headers or {}), "Accept-Encoding": "identity"}
                if body is not None and "content-type" not in {k.lower() for k in sent}:
                    sent["Content-Type"] = JSON_TYPE  # vLLM refuses an untyped body (400)
                conn.request(method, path, body=body, headers=sent)
                resp = conn.getresponse()
            except (OSError, http.client.HTTPException) as exc:
                raise _failure(url, exc, deadline_s) from None
            content_type = resp.getheader("content-type") or ""
            yield Streaming(url, resp.status, content_type, resp, deadline_s, cap)
        finally:
            conn.close()

    def fetch(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        *,
        deadline_s: float,
        cap: int = SMALL_REPLY,
    ) -> Reply:
        with self.open(method, path, body, deadline_s=deadline_s, cap=cap) as reply:
            return Reply(reply.status, reply.read(), reply.content_type)

    def get(self, path: str, *, deadline_s: float, cap: int = SMALL_REPLY) -> Reply:
        return self.fetch("GET", path, deadline_s=deadline_s, cap=cap)


def wire_cause(exc: BaseException) -> WireError | None:
    """The WireError behind a client's wrapper exception (openai wraps what a transport raises)."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return None
        if isinstance(seen, WireError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _failure(url: str, exc: BaseException, deadline_s: float) -> WireError:
    if isinstance(exc, TimeoutError | socket.timeout):
        return PeerUnreachable(f"{url}: no complete reply within {deadline_s:g} s")
    if isinstance(exc, ConnectionError | http.client.RemoteDisconnected | socket.gaierror):
        return PeerUnreachable(f"{url}: {_reason(exc)}")
    if isinstance(exc, http.client.HTTPException):
        return WireError(f"{url}: not a valid HTTP reply ({_reason(exc)})")
    return PeerUnreachable(f"{url}: {_reason(exc)}")


def _reason(exc: BaseException) -> str:
    text = str(exc).splitlines()[0][:160] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _size(n: int) -> str:
    return f"{n // MIB} MiB" if n >= MIB else f"{n} bytes"
