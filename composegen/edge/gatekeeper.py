"""The edge's gatekeeper (stdlib only): this module, the routing table, and its parts gate_rules,
gate_upstream and gate_framing, which render joins into the one file the edge runs (python3 -I).

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
     first failure); for an engine asleep, 503 with composegen's stage, never the engine's words
     (`asleep_since`, or a `standby` engine's sleeping 503 or silence).
A client that hangs up ends its upstream request within WATCH_S, streaming or not (vLLM aborts a request
whose connection closes). Every answer of ours is JSON in the OpenAI error shape. Both state files are
re-read when they change (stat per request): keys and switches take effect at once, and nothing restarts.
One access-log line per request names the client, never the key.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from http.server import ThreadingHTTPServer

from composegen.edge.gate_framing import Framing
from composegen.edge.gate_rules import (
    HOP_BY_HOP,
    IDLE_TIMEOUT_S,
    MAX_BUFFERED,
    MAX_CONNECTIONS,
    MODEL_POSTS,
    STANDBY_CHECK_S,
    Refused,
    StateFile,
    _error_doc,
    _ready,
    asleep_stage,
    client_for,
    models_list,
    stage_of,
)
from composegen.edge.gate_upstream import (
    Budget,
    ClientGone,
    EngineAsleep,
    Upstreams,
    Watch,
    _down_stage,
    _gone,
    check_sleep,
)


class Handler(Framing):
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
        """Malformed request lines and headers: the OpenAI error shape, not http.server's page."""
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
        answer = ROUTES.get((self.command, path)) or (
            _stored(self.command, path) and Handler._stored
        )
        if answer is not Handler._model_post:
            self._discard_body()  # read (the connection stays in step), never sent on
        if not answer:
            raise Refused(404, "not found", "not_found")
        return answer(self, routes, aliases)

    def _model_post(self, routes: Mapping[str, object], aliases: Mapping[str, object]) -> int:
        return self._with_body(lambda body: self._model_request(routes, aliases, body))

    def _models(self, routes: Mapping[str, object], aliases: Mapping[str, object]) -> int:
        return self._json(200, models_list(aliases))

    def _health(self, routes: Mapping[str, object], aliases: Mapping[str, object]) -> int:
        busy = [(a, r) for a, r in aliases.items() if not _ready(r)]
        if busy:
            return self._unavailable(routes, *busy[0])
        return self._json(200, {"status": "ok", "aliases": sorted(aliases)})

    def _stored(self, routes: Mapping[str, object], aliases: Mapping[str, object]) -> int:
        """A stored response (no model in the request): the first alias's stack keeps them."""
        if not aliases:
            raise Refused(404, "not found", "not_found")
        alias = sorted(aliases)[0]
        body = b"" if self.command == "POST" else None
        return self._forward(routes, alias, aliases[alias], body)

    # ---- the request body --------------------------------------------------------------------

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
        standby = route.get("standby") is True
        try:
            conn, resp = self._send_upstream(host, int(port), body, headers, standby)
        except ClientGone:
            self.close_connection = True
            return 499  # nginx's "client closed request": the log says who ended it
        except EngineAsleep:
            return self._asleep(routes, alias, route)
        except (OSError, http.client.HTTPException, ValueError) as exc:
            since = self.upstreams.failed(host, int(port), route.get("down_since"))
            stage = _down_stage(str(route.get("profile")), since, exc)
            return self._unavailable(routes, alias, {**route, "switch": {"stage": stage}})
        self.upstreams.answered(host, int(port))
        if standby and resp.status == 503:  # vLLM's own words for a sleeping engine: never relayed
            data = resp.read(65536)
            if b"sleeping" in data.lower():
                conn.close()
                return self._asleep(routes, alias, route)
            return self._relay_read(resp, data, conn)
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
        self, host: str, port: int, body: bytes | None, headers: dict[str, str], standby: bool
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """The request on a kept-alive connection; once more on a fresh one when a reused connection
        fails before any answer (the stack dropped it while idle, or was replaced: then every idle
        one goes). A STANDBY engine silent for STANDBY_CHECK_S is asked whether it sleeps."""
        for attempt in range(2):
            conn, reused = self.upstreams.take(host, port)
            asleep = threading.Event()  # only a standby engine is asked (no thread otherwise)
            check = (
                threading.Timer(STANDBY_CHECK_S, check_sleep, (conn, asleep)) if standby else None
            )
            try:
                conn.request(self.command, self.path, body=body, headers=headers)
                if conn.sock is not None:
                    self.watch.client(self.connection, conn.sock)  # a client gone while vLLM thinks
                if check is not None:
                    check.start()
                return conn, conn.getresponse()
            except OSError:  # RemoteDisconnected, a reset, a broken pipe, an address that is gone
                conn.close()
                if asleep.is_set():
                    raise EngineAsleep from None
                if _gone(self.connection):  # the watch ended it: never sent again
                    raise ClientGone from None
                if not reused or attempt:
                    raise
                self.upstreams.drop(host, port)
            except BaseException:
                conn.close()
                raise
            finally:
                if check is not None:
                    check.cancel()
                self.watch.client(self.connection, None)
        raise http.client.HTTPException("unreachable")

    def _asleep(self, routes: Mapping[str, object], alias: str, route: Mapping[str, object]) -> int:
        host, _, port = str(route["upstream"]).rpartition(":")
        since = self.upstreams.failed(host, int(port), route.get("asleep_since"))
        stage = asleep_stage(alias, str(route.get("profile")), since)
        return self._unavailable(routes, alias, {**route, "switch": {"stage": stage}})

    def _unavailable(self, routes: Mapping[str, object], alias: str, route: object) -> int:
        route = route if isinstance(route, dict) else {}
        found = route.get("switch")
        switch: Mapping[str, object] = found if isinstance(found, dict) else {}
        stage = stage_of(alias, route)
        retry = routes.get("retry_after")
        target = switch.get("to")
        what = f"{alias} is switching to {target}" if target else f"{alias} is unavailable"
        self._note = f" model={alias} stage={stage!r}"
        doc = _error_doc(503, f"{what}: {stage}", "unavailable")
        doc["error"]["stage"] = stage
        seconds = retry if isinstance(retry, int) and 0 < retry < 86400 else 30
        return self._send_json(503, doc, {"Retry-After": str(seconds)})


# what the gate serves: (method, path) → its answer; stored responses by their shape (_stored)
Answer = Callable[[Handler, Mapping[str, object], Mapping[str, object]], int]
ROUTES: dict[tuple[str, str], Answer] = {
    **{("POST", path): Handler._model_post for path in MODEL_POSTS},
    ("GET", "/v1/models"): Handler._models,
    ("GET", "/health"): Handler._health,
    ("HEAD", "/health"): Handler._health,
}


def _stored(method: str, path: str) -> bool:
    """GET /v1/responses/{id}, POST /v1/responses/{id}/cancel."""
    if not path.startswith("/v1/responses/") or path.count("/") not in (3, 4):
        return False
    return (method, path.endswith("/cancel")) in (("GET", False), ("POST", True))


class Server(ThreadingHTTPServer):
    """A thread per connection, at most MAX_CONNECTIONS at once (the next: told 503, closed)."""

    daemon_threads = True
    request_queue_size = 1024

    def __init__(self, address: tuple[str, int], handler: type[Handler]) -> None:
        super().__init__(address, handler)
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def process_request(self, request, client_address):  # type: ignore[no-untyped-def]
        if not self.slots.acquire(blocking=False):
            doc = _error_doc(503, "the edge is at its connection limit; retry", "unavailable")
            body = json.dumps(doc)
            head = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1"
            head += f"\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n{body}"
            with contextlib.suppress(OSError):
                request.settimeout(1.0)
                request.sendall(head.encode())
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

    handler: type[Handler] = type("Bound", (Handler,), {})  # this server's state, not the class's
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
    # PID 1 of its container: SIGTERM has no default action there, so `docker stop` waited 10 s
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"edge: gatekeeper listening on :{args.port}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
