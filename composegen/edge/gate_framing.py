"""The gatekeeper's HTTP/1.1 framing (a part of gatekeeper.py; stdlib only): request bodies read within
their bounds (Content-Length or chunked), the stack's answer relayed as it arrives, our own JSON answers."""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler

from composegen.edge.gate_rules import BODY_TIMEOUT_S, HOP_BY_HOP, MAX_BODY, MAX_CHUNK_LINE, Refused
from composegen.edge.gate_upstream import Budget, Watch


class Framing(BaseHTTPRequestHandler):
    """What the handler reads and writes on the client's connection."""

    watch: Watch
    budget: Budget
    _answered: bool

    def _with_body(self, use: Callable[[bytes], int]) -> int:
        length = self._announced_length()
        reserved = length if length is not None else MAX_BODY
        if not self.budget.take(reserved):
            raise Refused(503, "the edge is busy; retry", "unavailable", {"Retry-After": "1"})
        try:
            body = self._read_body(length)
            return use(body)
        finally:
            self.budget.give_back(reserved)

    def _announced_length(self) -> int | None:
        """Content-Length, or None for a chunked body; Refused for a body not framed safely."""
        encoding = (self.headers.get("Transfer-Encoding") or "").strip().lower()
        length = self.headers.get("Content-Length")
        if encoding and length is not None:
            raise Refused(400, "both Content-Length and Transfer-Encoding", "invalid_request_error")
        if encoding:
            if encoding != "chunked":
                raise Refused(
                    501,
                    f"transfer encoding {encoding[:40]!r} is not supported",
                    "invalid_request_error",
                )
            return None
        if length is None:
            return 0
        if not length.strip().isdigit():
            raise Refused(400, "Content-Length is not a number", "invalid_request_error")
        if int(length) > MAX_BODY:
            raise Refused(413, f"request body larger than {MAX_BODY} bytes", "too_large")
        return int(length)

    def _read_body(self, length: int | None) -> bytes:
        self.watch.deadline(self.connection, BODY_TIMEOUT_S)
        try:
            body = self.rfile.read(length) if length is not None else self._read_chunked()
        except (OSError, ValueError):
            body = None
        finally:
            self.watch.deadline(self.connection, None)
        if body is None or (length is not None and len(body) != length):
            raise Refused(
                408, f"the request body did not arrive within {BODY_TIMEOUT_S:.0f} s", "timeout"
            )
        return body

    def _read_chunked(self) -> bytes | None:
        parts: list[bytes] = []
        total = 0
        while True:
            line = self.rfile.readline(MAX_CHUNK_LINE)
            size_text = line.split(b";", 1)[0].strip()
            if (
                not line.endswith(b"\n")
                or not size_text
                or any(c not in b"0123456789abcdefABCDEF" for c in size_text)
            ):
                raise Refused(400, "malformed chunked body", "invalid_request_error")
            size = int(size_text, 16)
            total += size
            if total > MAX_BODY:
                raise Refused(413, f"request body larger than {MAX_BODY} bytes", "too_large")
            if size == 0:
                while self.rfile.readline(MAX_CHUNK_LINE) not in (b"\r\n", b"\n", b""):
                    pass  # trailers: read, never forwarded
                return b"".join(parts)
            data = self.rfile.read(size)
            if len(data) != size or self.rfile.read(2) != b"\r\n":
                return None
            parts.append(data)

    def _discard_body(self) -> None:
        length = self._announced_length()
        if length != 0:
            self._read_body(length)

    # ---- forwarding --------------------------------------------------------------------------

    def _relay_read(
        self, resp: http.client.HTTPResponse, data: bytes, conn: http.client.HTTPConnection
    ) -> int:
        """An answer whose body was read already (DATA): passed on whole; CONN is not reused."""
        conn.close()
        head = self._head(resp.status, [*_passed(resp), ("Content-Length", str(len(data)))])
        self.wfile.write(head + data)
        return resp.status

    def _relay(self, resp: http.client.HTTPResponse) -> bool:
        """The stack's answer, passed on as it arrives; True when it was read to its end."""
        length = resp.getheader("Content-Length")
        headers = _passed(resp)
        if length is not None:
            head = self._head(resp.status, [*headers, ("Content-Length", length)])
            self.wfile.write(head + resp.read(65536))  # the head and the first bytes in one segment
            while chunk := resp.read(65536):
                self.wfile.write(chunk)
            # a short read (the stack cut off) is not an end
            return resp.isclosed() and not resp.length
        head = self._head(resp.status, [*headers, ("Transfer-Encoding", "chunked")])
        pending = head
        while chunk := resp.read1(65536):  # SSE: pass each piece on as it arrives
            self.wfile.write(pending + b"%x\r\n%s\r\n" % (len(chunk), chunk))
            pending = b""
        self.wfile.write(pending + b"0\r\n\r\n")
        self._answered = True
        return True

    # ---- our own answers ---------------------------------------------------------------------

    def _head(self, status: int, headers: list[tuple[str, str]]) -> bytes:
        self._answered = True
        reason = self.responses.get(status, ("",))[0]
        lines = [f"HTTP/1.1 {status} {reason}", *(f"{k}: {v}" for k, v in headers)]
        if self.close_connection:
            lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace")

    def _json(self, status: int, doc: Mapping[str, object]) -> int:
        return self._send_json(status, doc, {})

    def _send_json(self, status: int, doc: Mapping[str, object], headers: Mapping[str, str]) -> int:
        data = json.dumps(doc).encode("utf-8")
        fields = [
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(data))),
            *headers.items(),
        ]
        self.wfile.write(self._head(status, fields) + (b"" if self.command == "HEAD" else data))
        return status


def _passed(resp: http.client.HTTPResponse) -> list[tuple[str, str]]:
    """The stack's headers a client gets (framing and the stack's server and date are ours)."""
    dropped = HOP_BY_HOP | {"content-length", "server", "date"}
    return [(k, v) for k, v in resp.getheaders() if k.lower() not in dropped]
