"""The edge's gatekeeper: runs inside the edge (python3 -I, stdlib only; out/edge/gatekeeper.py is a copy).

Behind the proxy (which already answers 404 outside the allowlist), for every request:
  1. the client: `Authorization: Bearer KEY`, whose sha256 is looked up in /state/keys.json (names,
     hashes, expiry, revocation — never a key); 401 otherwise;
  2. the model: `model` in the JSON body must be an alias of /state/routes.json; it is rewritten to the
     served name of the stack the alias points at, and the request goes to that stack;
  3. during a switch (routes.json says so) or while that stack cannot be reached: 503 with Retry-After
     and the load stage, never another model.
Both files are re-read when they change (stat per request): keys and switches take effect at once, and
nothing restarts. One access-log line per request names the client, never the key.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import os
import sys
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TypedDict

MAX_BODY = 16 << 20
UPSTREAM_TIMEOUT_S = 900.0
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-authorization"}
MODEL_POSTS = ("/v1/chat/completions", "/v1/completions", "/v1/responses")
# The state files and the wire payloads stay plain JSON objects here (stdlib only, no composegen import):
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


class StateFile:
    """A JSON file re-read whenever its (mtime, size, inode) changes; the last good copy otherwise."""

    def __init__(self, path: str, empty: JsonDoc) -> None:
        self.path, self.empty = path, empty
        self._sig: tuple | None = None
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
                except (OSError, ValueError):
                    self._doc = self.empty  # a broken file lets nobody in, rather than everybody
                self._sig = sig
            return self._doc


def _in_future(expires: object, now: datetime) -> bool:
    if not isinstance(expires, str) or len(expires) > 64:
        return False
    try:
        moment = datetime.fromisoformat(expires.replace("Z", "+00:00"))
    except ValueError:
        return False
    return moment.tzinfo is not None and moment > now


def client_for(keys: JsonDoc, authorization: str | None, now: datetime) -> str | None:
    """The client name a bearer key belongs to (valid, not revoked, not expired), else None."""
    if not authorization or not authorization.startswith("Bearer "):
        return None
    digest = hashlib.sha256(authorization[7:].strip().encode("utf-8")).hexdigest()
    clients = keys.get("clients")
    for client in clients if isinstance(clients, list) else []:
        if not isinstance(client, dict) or client.get("sha256") != digest or client.get("revoked"):
            continue
        expires = client.get("expires")
        if expires is not None and not _in_future(expires, now):
            return None  # expired, or an expiry that is not a time with a zone: refused, never forever
        name = client.get("name")
        return name if isinstance(name, str) else None
    return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "composegen-edge"
    sys_version = ""
    keys: StateFile
    routes: StateFile

    def log_message(self, format: str, *args: object) -> None:  # the access log is ours (log_access)
        pass

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def do_HEAD(self) -> None:
        self._serve()

    def _serve(self) -> None:
        self._started, self._client, self._note = time.monotonic(), "-", ""
        status = self._dispatch()
        self.log_access(status)

    def log_access(self, status: int) -> None:
        path = self.path.split("?", 1)[0][:200]
        took = time.monotonic() - self._started
        line = f'edge: client={self._client} "{self.command} {path}" {status} {took:.3f}s{self._note}'
        print(line.replace("\n", " "), flush=True)

    def _dispatch(self) -> int:
        path = self.path.split("?", 1)[0]
        if "/." in path or "//" in path or "%" in path or "\\" in path:
            return self._error(404, "not found", "not_found")  # no dot segments or encodings reach the stack
        body = self._read_body()
        if body is None:
            return self._error(413, f"request body larger than {MAX_BODY} bytes", "too_large")
        client = client_for(self.keys.get(), self.headers.get("Authorization"), datetime.now(UTC))
        if client is None:
            return self._error(401, "a valid API key is required", "unauthorized", {"WWW-Authenticate": "Bearer"})
        self._client = client
        routes = self.routes.get()
        table = routes.get("aliases")
        aliases: dict = table if isinstance(table, dict) else {}
        if path == "/v1/models" and self.command == "GET":
            return self._json(200, models_list(aliases))
        if path == "/health" and self.command in ("GET", "HEAD"):
            busy = [(a, r) for a, r in aliases.items() if not _ready(r)]
            if busy:
                return self._unavailable(routes, *busy[0])
            return self._json(200, {"status": "ok", "aliases": sorted(aliases)})
        if self.command == "POST" and path in MODEL_POSTS:
            return self._model_request(routes, aliases, path, body)
        stored = path.startswith("/v1/responses/") and path.count("/") in (3, 4)
        if stored and aliases and (self.command, path.endswith("/cancel")) in (("GET", False), ("POST", True)):
            alias = sorted(aliases)[0]  # no model in the request: the first alias's stack keeps responses
            return self._forward(routes, alias, aliases[alias], body)
        return self._error(404, "not found", "not_found")

    def _model_request(self, routes: dict, aliases: dict, path: str, body: bytes) -> int:
        try:
            doc = json.loads(body or b"{}")
        except ValueError:
            return self._error(400, "the body is not JSON", "invalid_request_error")
        model = doc.get("model") if isinstance(doc, dict) else None
        if not isinstance(model, str) or model not in aliases:
            known = ", ".join(sorted(aliases)) or "none"
            return self._error(404, f"The model `{str(model)[:80]}` does not exist (models: {known}).", "not_found")
        route = aliases[model]
        if not _ready(route):
            return self._unavailable(routes, model, route)
        doc["model"] = route["served_name"]
        return self._forward(routes, model, route, json.dumps(doc).encode("utf-8"))

    def _forward(self, routes: dict, alias: str, route: dict, body: bytes) -> int:
        if not _ready(route):
            return self._unavailable(routes, alias, route)
        host, _, port = str(route["upstream"]).rpartition(":")
        self._note = f" model={alias} -> {route.get('profile')}"
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP | {"authorization", "host"}}
        headers["Content-Length"] = str(len(body))
        headers["Host"] = f"{host}:{port}"
        conn = http.client.HTTPConnection(host, int(port), timeout=UPSTREAM_TIMEOUT_S)
        try:
            conn.request(self.command, self.path, body=body if self.command == "POST" else None, headers=headers)
            resp = conn.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            stage = f"{route.get('profile')} is not answering ({type(exc).__name__})"
            return self._unavailable(routes, alias, {**route, "switch": {"stage": stage}})
        try:
            self._relay(resp)
        except (OSError, http.client.HTTPException):
            self.close_connection = True  # the client or the stack went away mid-answer
        finally:
            conn.close()
        return resp.status

    def _relay(self, resp: http.client.HTTPResponse) -> None:
        self.send_response(resp.status)
        length = resp.getheader("Content-Length")
        for key, value in resp.getheaders():
            if key.lower() not in HOP_BY_HOP | {"content-length", "server", "date"}:
                self.send_header(key, value)
        if length is not None:
            self.send_header("Content-Length", length)
            self.end_headers()
            while chunk := resp.read(65536):
                self.wfile.write(chunk)
            return
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        while chunk := resp.read1(65536):  # SSE: pass each piece on as it arrives
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")

    def _read_body(self) -> bytes | None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = 0
        if length > MAX_BODY:
            self.close_connection = True
            return None
        return self.rfile.read(length) if length > 0 else b""

    def _unavailable(self, routes: dict, alias: str, route: dict) -> int:
        found = route.get("switch")
        switch: dict = found if isinstance(found, dict) else {}
        stage = str(switch.get("stage") or "no stack assigned")[:200]
        retry = int(routes.get("retry_after") or 30)
        target = switch.get("to")
        what = f"{alias} is switching to {target}" if target else f"{alias} is unavailable"
        self._note = f" model={alias} stage={stage!r}"
        body = {"error": {"message": f"{what}: {stage}", "type": "unavailable", "code": 503, "stage": stage}}
        return self._json(503, body, {"Retry-After": str(retry)})

    def _error(self, status: int, message: str, kind: str, headers: dict | None = None) -> int:
        return self._json(status, {"error": {"message": message, "type": kind, "code": status}}, headers)

    def _json(self, status: int, doc: Mapping[str, object], headers: dict | None = None) -> int:
        data = json.dumps(doc).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        return status


def _ready(route: object) -> bool:
    return (
        isinstance(route, dict)
        and not route.get("switch")
        and isinstance(route.get("upstream"), str)
        and isinstance(route.get("served_name"), str)
    )


def models_list(aliases: dict) -> ModelList:
    data = [ModelEntry(id=alias, object="model", owned_by="composegen-edge") for alias in sorted(aliases)]
    return ModelList(object="list", data=data)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="composegen edge gatekeeper")
    parser.add_argument("--state", required=True)
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args(argv)
    Handler.keys = StateFile(os.path.join(args.state, "keys.json"), {"clients": []})
    Handler.routes = StateFile(os.path.join(args.state, "routes.json"), {"aliases": {}})
    server = ThreadingHTTPServer(("0.0.0.0", args.port), Handler)
    server.daemon_threads = True
    print(f"edge: gatekeeper listening on :{args.port}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
