"""The edge's gatekeeper: runs inside the edge (python3 -I, stdlib only; out/edge/gatekeeper.py is a
copy).

Behind the proxy (which already answers 404 outside the allowlist), for every request:
  1. the client, from the headers alone: `Authorization: Bearer KEY`, whose sha256 is looked up in
     /state/keys.json (names, hashes, expiry, revocation — never a key); otherwise 401 at once and the
     connection closed, before a byte of the body is read (an anonymous client costs one header read);
  2. the body, within bounds: at most MAX_BODY bytes (Content-Length or chunked), read within
     BODY_TIMEOUT_S, and at most MAX_BUFFERED bytes held for all requests at once; a GET's body is never
     forwarded; JSON nested deeper than the parser allows is a 400;
  3. the model: `model` in the JSON body must be an alias of /state/routes.json; it is rewritten to the
     served name of the stack the alias points at, and the request goes to that stack over a reused
     connection;
  4. during a switch (routes.json says so) or while that stack cannot be reached: 503 with Retry-After
     and the stage, never another model. A stack that is down answers at once: its name is looked up
     for at most RESOLVE_WAIT_S (Docker's DNS gives up on a missing name only after ~10 s), and the
     stage says since when it is down (`down_since`, written by `composegen down`, else the gate's
     first failure).
A client that hangs up ends its upstream request within WATCH_S, streaming or not (vLLM aborts a request
whose connection closes). Every answer of ours is JSON in the OpenAI error shape. Both state files are
re-read when they change (stat per request): keys and switches take effect at once, and nothing restarts.
One access-log line per request names the client, never the key.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import http.client
import json
import os
import select
import selectors
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TypedDict, TypeGuard

MAX_BODY = 16 << 20
MAX_BUFFERED = 128 << 20  # request bodies held at once, all clients together
BODY_TIMEOUT_S = 30.0  # the whole body, however slowly it trickles
# a kept-alive connection with no request (longer than the proxy's keep-alive)
IDLE_TIMEOUT_S = 120.0
UPSTREAM_TIMEOUT_S = 900.0
# Docker's DNS names a running stack within milliseconds; for a removed one it asks servers an
# internal network cannot reach (5 s x 2 tries) before it fails. Past this wait the stack is down.
RESOLVE_WAIT_S = 0.5
RESOLVE_WAIT_DOWN_S = 0.05  # once found down: a stack that came back still answers this fast
LOOKUPS = 16  # name lookups in flight at once; past it, a stack being looked up is down
CONNECT_TIMEOUT_S = 3.0
MAX_CONNECTIONS = 512
WATCH_S = 0.1  # how often hung-up clients and overdue bodies are looked for
IDLE_UPSTREAMS = 32  # kept-alive connections per stack
MAX_CHUNK_LINE = 1024
HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "proxy-authorization",
}
MODEL_POSTS = ("/v1/chat/completions", "/v1/completions", "/v1/responses")
# The state files and the wire payloads stay plain JSON objects here (stdlib only, no composegen
# import):
# a state file is typed `dict[str, object]`, so every field is checked where it is read.
JsonDoc = dict[str, object]


class ModelEntry(TypedDict):
    id: str
    object: str
    owned_by: str


class ModelList(TypedDict):
    """GET /v1/models as the OpenAI API answers it: the edge's aliases."""

    object: str
    data: list[ModelEntry]


class Refused(Exception):
    """A request answered with an error of ours: (status, message, OpenAI error type, extra
    headers)."""

    def __init__(
        self, status: int, message: str, kind: str, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.kind, self.headers = (
            status,
            message,
            kind,
            dict(headers or {}),
        )


class StateFile:
    """A JSON file re-read whenever its (mtime, size, inode) changes; the last good copy
    otherwise."""

    def __init__(self, path: str, empty: JsonDoc) -> None:
        self.path, self.empty = path, empty
        self._sig: tuple[int, int, int] | None = None
        self._doc: JsonDoc = empty
        self._lock = threading.Lock()

    def get(self) -> JsonDoc:
        try:
            st = os.stat(self.path)
            sig = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            return self.empty
        with self._lock:
            if sig != self._sig:
                try:
                    with open(self.path, encoding="utf-8") as fh:
                        doc = json.load(fh)
                    self._doc = doc if isinstance(doc, dict) else self.empty
                except (OSError, ValueError, RecursionError):
                    self._doc = self.empty  # a broken file lets nobody in, rather than everybody
                self._sig = sig
            return self._doc


def _stamp(text: object) -> datetime | None:
    """A time with a zone from a state file (`…Z`), else None."""
    if not isinstance(text, str) or len(text) > 64:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def _in_future(expires: object, now: datetime) -> bool:
    moment = _stamp(expires)
    return moment is not None and moment > now


def client_for(keys: JsonDoc, authorization: str | None, now: datetime) -> str | None:
    """The client name a bearer key belongs to (valid, not revoked, not expired), else None."""
    if not authorization or not authorization.startswith("Bearer "):
        return None
    digest = hashlib.sha256(authorization[7:].strip().encode("utf-8", "replace")).hexdigest()
    clients = keys.get("clients")
    for client in clients if isinstance(clients, list) else []:
        if not isinstance(client, dict) or client.get("sha256") != digest or client.get("revoked"):
            continue
        expires = client.get("expires")
        if expires is not None and not _in_future(expires, now):
            # expired, or an expiry that is not a time with a zone: refused, never forever
            return None
        name = client.get("name")
        return name if isinstance(name, str) else None
    return None


class Watch:
    """One thread for every connection: cuts a body read that passes its deadline, and ends the
    upstream request of a client that hung up (its socket reads as closed), so vLLM stops generating
    for nobody."""

    def __init__(self) -> None:
        self._selector = selectors.DefaultSelector()
        self._deadlines: dict[socket.socket, float] = {}
        self._lock = threading.Lock()
        threading.Thread(target=self._run, name="watch", daemon=True).start()

    def deadline(self, sock: socket.socket, seconds: float | None) -> None:
        with self._lock:
            if seconds is None:
                self._deadlines.pop(sock, None)
            else:
                self._deadlines[sock] = time.monotonic() + seconds

    def client(self, sock: socket.socket, upstream: socket.socket | None) -> None:
        """Watch SOCK while UPSTREAM serves it (None: stop watching)."""
        with self._lock:
            try:
                if upstream is None:
                    self._selector.unregister(sock)
                else:
                    self._selector.register(sock, selectors.EVENT_READ, upstream)
            except (KeyError, ValueError, OSError):
                pass

    def _run(self) -> None:
        while True:
            try:
                ready = self._selector.select(WATCH_S)
            # a socket closed while registered: the next round sees the rest
            except (OSError, ValueError):
                ready = []
                time.sleep(WATCH_S)
            for key, _ in ready:
                self._readable(key.fileobj, key.data)  # type: ignore[arg-type]
            now = time.monotonic()
            with self._lock:
                overdue = [sock for sock, at in self._deadlines.items() if at <= now]
                for sock in overdue:
                    del self._deadlines[sock]
            for sock in overdue:
                # its reads end; our answer (408) can still be written
                _shutdown(sock, socket.SHUT_RD)

    def _readable(self, sock: socket.socket, upstream: socket.socket) -> None:
        gone = _gone(sock)
        # gone, or it sent more (a pipelined request): either way, done watching
        self.client(sock, None)
        if gone:
            _shutdown(upstream)


def _shutdown(sock: socket.socket, how: int = socket.SHUT_RDWR) -> None:
    with contextlib.suppress(OSError):  # already closed: nothing left to end
        sock.shutdown(how)


class ClientGone(Exception):
    """The client hung up while the stack worked on its request: nobody is left to answer."""


def _gone(sock: socket.socket) -> bool:
    """SOCK's peer closed it (never blocks: a socket with a timeout waits in recv, even with
    MSG_DONTWAIT)."""
    try:
        if not select.select([sock], [], [], 0)[0]:
            return False
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


class NotResolved(OSError):
    """A stack's name did not resolve within the wait (or at all): the stack is down."""


class Lookups:
    """Name lookups that never keep a client waiting past a bound: each runs in its own thread (the
    resolver call cannot be cut short), at most LOOKUPS at once."""

    def __init__(self) -> None:
        self._slots = threading.BoundedSemaphore(LOOKUPS)

    def address(self, host: str, port: int, wait: float) -> tuple[str, int]:
        if not self._slots.acquire(blocking=False):
            raise NotResolved(f"{host}: lookups busy")
        found: list[tuple[str, int] | BaseException] = []
        done = threading.Event()

        def look() -> None:
            try:
                infos = socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_STREAM)
                found.append((str(infos[0][4][0]), int(infos[0][4][1])))
            except (OSError, IndexError) as exc:
                found.append(exc)
            finally:
                self._slots.release()
                done.set()

        threading.Thread(target=look, name="lookup", daemon=True).start()
        if not done.wait(wait) or not isinstance(found[0], tuple):
            raise NotResolved(host)
        return found[0]


class StackConnection(http.client.HTTPConnection):
    """A connection whose name lookup and connect are bounded (the answer itself may take
    UPSTREAM_TIMEOUT_S: a long generation)."""

    def __init__(self, host: str, port: int, lookups: Lookups, wait: float) -> None:
        super().__init__(host, port, timeout=UPSTREAM_TIMEOUT_S)
        self._lookups, self._wait = lookups, wait

    def connect(self) -> None:
        address = self._lookups.address(self.host, self.port, self._wait)
        self.sock = socket.create_connection(address, CONNECT_TIMEOUT_S)
        self.sock.settimeout(UPSTREAM_TIMEOUT_S)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class Upstreams:
    """Kept-alive connections to the stacks, reused across requests (no connect per request), and
    since when each unreachable stack has been found so."""

    def __init__(self) -> None:
        self._idle: dict[tuple[str, int], list[http.client.HTTPConnection]] = {}
        self._down: dict[tuple[str, int], datetime] = {}
        self._answered: dict[tuple[str, int], datetime] = {}
        self._lock = threading.Lock()
        self._lookups = Lookups()

    def take(self, host: str, port: int) -> tuple[http.client.HTTPConnection, bool]:
        with self._lock:
            idle = self._idle.get((host, port))
            if idle:
                return idle.pop(), True
            wait = RESOLVE_WAIT_DOWN_S if (host, port) in self._down else RESOLVE_WAIT_S
        return StackConnection(host, port, self._lookups, wait), False

    def failed(self, host: str, port: int, downed: object = None) -> datetime:
        """The stack at HOST:PORT cannot be reached: since when. DOWNED is when composegen downed it
        (routes.json), believed unless the stack has answered since; else the first failure in a
        row."""
        at = _stamp(downed)
        with self._lock:
            first = self._down.setdefault((host, port), datetime.now(UTC))
            last_answer = self._answered.get((host, port))
        return at if at is not None and (last_answer is None or at > last_answer) else first

    def answered(self, host: str, port: int) -> None:
        with self._lock:
            self._down.pop((host, port), None)
            self._answered[(host, port)] = datetime.now(UTC)

    def drop(self, host: str, port: int) -> None:
        """Close every idle connection to HOST:PORT: one turned out dead, so the stack behind it was
        replaced (a restart, a recovery) and the others are as old."""
        with self._lock:
            idle = self._idle.pop((host, port), [])
        for conn in idle:
            conn.close()

    def give_back(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            idle = self._idle.setdefault((conn.host, conn.port), [])
            if len(idle) < IDLE_UPSTREAMS:
                idle.append(conn)
                return
        conn.close()


class Budget:
    """Bytes of request bodies held at once; a request that would pass it is told to retry."""

    def __init__(self, limit: int) -> None:
        self.limit, self.used = limit, 0
        self._lock = threading.Lock()

    def take(self, size: int) -> bool:
        with self._lock:
            if self.used + size > self.limit:
                return False
            self.used += size
            return True

    def give_back(self, size: int) -> None:
        with self._lock:
            self.used -= size


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # the head and each streamed chunk leave at once, not after a delayed ACK
    disable_nagle_algorithm = True
    timeout = IDLE_TIMEOUT_S
    keys: StateFile
    routes: StateFile
    watch: Watch
    upstreams: Upstreams
    budget: Budget

    # the access log is ours (log_access)
    def log_message(self, format: str, *args: object) -> None:
        pass

    def __getattr__(self, name: str) -> object:
        # every method is ours to answer (the proxy lets only a few through)
        if name.startswith("do_"):
            return self._serve
        raise AttributeError(name)

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        except OSError:  # the client went away, or was silent past a bound: nobody left to answer
            self.close_connection = True
        except Exception as exc:  # never a dead thread: the client gets an answer, the log a line
            self.close_connection = True
            print(f"edge: internal error {type(exc).__name__}", flush=True)
            if not getattr(self, "_answered", True):
                self._send_json(
                    500, _error_doc(500, "the edge failed on this request", "internal_error"), {}
                )

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Malformed request lines and headers: the OpenAI error shape, not http.server's HTML
        page."""
        self.close_connection = True
        self._send_json(
            code, _error_doc(code, message or "bad request", "invalid_request_error"), {}
        )

    def _serve(self) -> None:
        self._started, self._client, self._note, self._answered = time.monotonic(), "-", "", False
        try:
            status = self._dispatch()
        except Refused as refused:
            if refused.status in (400, 401, 408, 411, 413, 501):
                # the body may be unread: this connection cannot be reused
                self.close_connection = True
            status = self._send_json(
                refused.status,
                _error_doc(refused.status, refused.message, refused.kind),
                refused.headers,
            )
        self.log_access(status)

    def log_access(self, status: int) -> None:
        path = self.path.split("?", 1)[0][:200]
        took = time.monotonic() - self._started
        line = (
            f'edge: client={self._client} "{self.command} {path}" {status} {took:.3f}s{self._note}'
        )
        print(line.replace("\n", " "), flush=True)

    def _dispatch(self) -> int:
        path = self.path.split("?", 1)[0]
        if "/." in path or "//" in path or "%" in path or "\\" in path or not path.startswith("/"):
            # no dot segments or encodings reach the stack
            raise Refused(404, "not found", "not_found")
        client = client_for(self.keys.get(), self.headers.get("Authorization"), datetime.now(UTC))
        if client is None:
            raise Refused(
                401, "a valid API key is required", "unauthorized", {"WWW-Authenticate": "Bearer"}
            )
        self._client = client
        routes = self.routes.get()
        table = routes.get("aliases")
        aliases: Mapping[str, object] = table if isinstance(table, dict) else {}
        if self.command == "POST" and path in MODEL_POSTS:
            return self._with_body(lambda body: self._model_request(routes, aliases, body))
        # a body on anything else is read (the connection stays in step), never sent on
        self._discard_body()
        if path == "/v1/models" and self.command == "GET":
            return self._json(200, models_list(aliases))
        if path == "/health" and self.command in ("GET", "HEAD"):
            busy = [(a, r) for a, r in aliases.items() if not _ready(r)]
            if busy:
                return self._unavailable(routes, *busy[0])
            return self._json(200, {"status": "ok", "aliases": sorted(aliases)})
        stored = path.startswith("/v1/responses/") and path.count("/") in (3, 4)
        if (
            stored
            and aliases
            and (self.command, path.endswith("/cancel")) in (("GET", False), ("POST", True))
        ):
            # no model in the request: the first alias's stack keeps responses
            alias = sorted(aliases)[0]
            return self._forward(
                routes, alias, aliases[alias], b"" if self.command == "POST" else None
            )
        raise Refused(404, "not found", "not_found")

    # ---- the request body
    # ----------------------------------------------------------------------------

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
        """Content-Length, or None for a chunked body; Refused for a body that cannot be framed
        safely."""
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

    # ---- forwarding
    # ----------------------------------------------------------------------------------

    # routes.json as read: each value is checked where it is used (_ready), never trusted by shape
    def _model_request(
        self, routes: Mapping[str, object], aliases: Mapping[str, object], body: bytes
    ) -> int:
        try:
            doc = json.loads(body or b"{}")
        except (ValueError, RecursionError):
            raise Refused(
                400, "the body is not JSON (or nests too deep)", "invalid_request_error"
            ) from None
        model = doc.get("model") if isinstance(doc, dict) else None
        if not isinstance(model, str) or model not in aliases:
            known = ", ".join(sorted(aliases)) or "none"
            raise Refused(
                404, f"The model `{str(model)[:80]}` does not exist (models: {known}).", "not_found"
            )
        route = aliases[model]
        if not _ready(route):
            return self._unavailable(routes, model, route)
        doc["model"] = route["served_name"]
        return self._forward(routes, model, route, json.dumps(doc).encode("utf-8"))

    def _forward(
        self, routes: Mapping[str, object], alias: str, route: object, body: bytes | None
    ) -> int:
        if not _ready(route):
            return self._unavailable(routes, alias, route)
        host, _, port = str(route["upstream"]).rpartition(":")
        self._note = f" model={alias} -> {route.get('profile')}"
        headers = {
            k: v
            for k, v in self.headers.items()
            if k.lower() not in HOP_BY_HOP | {"authorization", "host", "content-length"}
        }
        headers["Host"] = f"{host}:{port}"
        if body is not None:
            headers["Content-Length"] = str(len(body))
        try:
            conn, resp = self._send_upstream(host, int(port), body, headers)
        except ClientGone:
            self.close_connection = True
            return 499  # nginx's "client closed request": the log says who ended it
        except (OSError, http.client.HTTPException, ValueError) as exc:
            since = self.upstreams.failed(host, int(port), route.get("down_since"))
            stage = _down_stage(str(route.get("profile")), since, exc)
            return self._unavailable(routes, alias, {**route, "switch": {"stage": stage}})
        self.upstreams.answered(host, int(port))
        try:
            self.watch.client(self.connection, conn.sock)
            complete = self._relay(resp)
        except (OSError, http.client.HTTPException):
            complete = False
            self.close_connection = True  # the client or the stack went away mid-answer
        finally:
            self.watch.client(self.connection, None)
        if complete and not resp.will_close:
            self.upstreams.give_back(conn)
        else:
            conn.close()
        return resp.status

    def _send_upstream(
        self, host: str, port: int, body: bytes | None, headers: dict[str, str]
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """The request on a kept-alive connection; once more on a fresh one when a reused connection
        fails before any answer (the stack dropped it while idle, or was replaced: then every idle
        one goes)."""
        for attempt in range(2):
            conn, reused = self.upstreams.take(host, port)
            try:
                conn.request(self.command, self.path, body=body, headers=headers)
                if conn.sock is not None:
                    self.watch.client(self.connection, conn.sock)  # a client gone while vLLM thinks
                return conn, conn.getresponse()
            except OSError:  # RemoteDisconnected, a reset, a broken pipe, an address that is gone
                conn.close()
                if _gone(self.connection):  # the watch ended it: never sent again
                    raise ClientGone from None
                if not reused or attempt:
                    raise
                self.upstreams.drop(host, port)
            except BaseException:
                conn.close()
                raise
            finally:
                self.watch.client(self.connection, None)
        raise http.client.HTTPException("unreachable")

    def _relay(self, resp: http.client.HTTPResponse) -> bool:
        """The stack's answer, passed on as it arrives; True when it was read to its end."""
        length = resp.getheader("Content-Length")
        headers = [
            (k, v)
            for k, v in resp.getheaders()
            if k.lower() not in HOP_BY_HOP | {"content-length", "server", "date"}
        ]
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

    # ---- our own answers
    # -----------------------------------------------------------------------------

    def _head(self, status: int, headers: list[tuple[str, str]]) -> bytes:
        self._answered = True
        reason = self.responses.get(status, ("",))[0]
        lines = [f"HTTP/1.1 {status} {reason}", *(f"{k}: {v}" for k, v in headers)]
        if self.close_connection:
            lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace")

    def _unavailable(self, routes: Mapping[str, object], alias: str, route: object) -> int:
        found = route.get("switch") if isinstance(route, dict) else None
        switch: Mapping[str, object] = found if isinstance(found, dict) else {}
        stage = str(switch.get("stage") or "no stack assigned")[:200]
        retry = routes.get("retry_after")
        target = switch.get("to")
        what = f"{alias} is switching to {target}" if target else f"{alias} is unavailable"
        self._note = f" model={alias} stage={stage!r}"
        doc = _error_doc(503, f"{what}: {stage}", "unavailable")
        doc["error"]["stage"] = stage
        headers = {
            "Retry-After": str(retry if isinstance(retry, int) and 0 < retry < 86400 else 30)
        }
        return self._send_json(503, doc, headers)

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


def _error_doc(status: int, message: str, kind: str) -> dict[str, dict[str, object]]:
    return {"error": {"message": message, "type": kind, "param": None, "code": status}}


def _down_stage(profile: str, since: datetime, exc: BaseException) -> str:
    """A stage clients may read: what happened in our words, never a Python exception name."""
    # composegen's stamp in UTC, for a person (the gate cannot import privatestate's one format)
    at = since.astimezone(UTC).isoformat(" ", "seconds").removesuffix("+00:00") + " UTC"
    if isinstance(exc, (NotResolved, socket.gaierror)):
        return f"{profile} is down since {at} (its name does not resolve)"
    return f"{profile} is not answering since {at} ({_reason(exc)})"


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused: the engine is not listening"
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    return "the connection failed"


def _ready(route: object) -> TypeGuard[Mapping[str, object]]:
    return (
        isinstance(route, dict)
        and not route.get("switch")
        and isinstance(route.get("upstream"), str)
        and isinstance(route.get("served_name"), str)
    )


def models_list(aliases: Mapping[str, object]) -> ModelList:
    data = [
        ModelEntry(id=alias, object="model", owned_by="composegen-edge")
        for alias in sorted(aliases)
    ]
    return ModelList(object="list", data=data)


class Server(ThreadingHTTPServer):
    """A thread per connection, at most MAX_CONNECTIONS at once (the next is told 503 and
    closed)."""

    daemon_threads = True
    request_queue_size = 1024

    def __init__(self, address: tuple[str, int], handler: type[Handler]) -> None:
        super().__init__(address, handler)
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def process_request(self, request, client_address):  # type: ignore[no-untyped-def]
        if not self.slots.acquire(blocking=False):
            body = json.dumps(
                _error_doc(503, "the edge is at its connection limit; retry", "unavailable")
            ).encode()
            head = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
            try:
                request.settimeout(1.0)
                request.sendall(
                    f"{head}Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                    + body
                )
            except OSError:
                pass
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request, client_address):  # type: ignore[no-untyped-def]
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


def serve(state_dir: str, host: str, port: int) -> Server:
    """The gatekeeper on HOST:PORT reading STATE_DIR's keys.json and routes.json (the caller runs
    `serve_forever`; tests run it in a thread)."""

    class Bound(Handler):
        pass

    handler = Bound
    handler.keys = StateFile(os.path.join(state_dir, "keys.json"), {"clients": []})
    handler.routes = StateFile(os.path.join(state_dir, "routes.json"), {"aliases": {}})
    handler.watch, handler.upstreams, handler.budget = Watch(), Upstreams(), Budget(MAX_BUFFERED)
    return Server((host, port), handler)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="composegen edge gatekeeper")
    parser.add_argument("--state", required=True)
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args(argv)
    server = serve(args.state, "0.0.0.0", args.port)
    print(f"edge: gatekeeper listening on :{args.port}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
