"""One stub HTTP server for the tests: a handler class served on loopback in a thread, shut down and
closed when the block ends. `with serving(Handler) as server:`; `url(server)` is its base URL.
`Quiet` is a handler base: no request log, `reply` sends a whole answer."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socketserver import BaseServer


class Quiet(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def reply(
        self,
        status: int,
        body: bytes,
        headers: dict | None = None,
        head: bool = False,
        upto: int | None = None,
    ) -> None:
        """STATUS, HEADERS and BODY's Content-Length, then BODY (not for a HEAD; its first UPTO
        bytes with UPTO)."""
        self.send_response(status)
        for k, v in {**(headers or {}), "Content-Length": str(len(body))}.items():
            self.send_header(k, v)
        self.end_headers()
        if not head:
            self.wfile.write(body[:upto])


@contextlib.contextmanager
def serving(
    handler: type[BaseHTTPRequestHandler], port: int = 0, *, poll: float = 0.05
) -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    server.daemon_threads = True
    with running(server, poll):
        yield server


@contextlib.contextmanager
def running(server: BaseServer, poll: float = 0.05) -> Iterator[BaseServer]:
    """Any socketserver (the gatekeeper's own too) served in a thread until the block ends."""
    threading.Thread(target=server.serve_forever, args=(poll,), daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def url(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_port}"
