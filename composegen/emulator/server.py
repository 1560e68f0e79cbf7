"""HTTP side of the emulator: a ThreadingHTTPServer speaking vLLM's OpenAI-compatible API.

Routes: GET /health /ping /version /load /v1/models /metrics; POST /ping /tokenize /detokenize
/v1/chat/completions /v1/completions /v1/responses. With --api-key/VLLM_API_KEY /v1/* and
/inference/v1/* need `Authorization: Bearer KEY` (401 {"error": "Unauthorized"} otherwise, before a
route is looked up, as recorded). Errors use vLLM's {"error": {...}} JSON; unknown paths FastAPI's
{"detail": "Not Found"}. As uvicorn does: `server: uvicorn`, compact JSON, /health and /ping answer an
empty body with no content type, streams are chunked and keep the connection. Requests are paced so
TTFT and decode rates are measurable: prefill sleeps prompt_tokens / EMU_PREFILL_TOK_S
(≤ EMU_PREFILL_SLEEP_CAP_S), each output token 1 /
EMU_DECODE_TOK_S (all together ≤ EMU_DECODE_SLEEP_CAP_S)."""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

from composegen.emulator import completions, versions
from composegen.emulator.chat import LORA_FAULT, RequestError, check_model, validation_error
from composegen.emulator.generation import ClientGone, Generation
from composegen.emulator.http_metrics import HttpRequest
from composegen.emulator.server_state import ServerState
from composegen.emulator.sleep import DEV_ROUTES, SleepError
from composegen.emulator.tokenizer import encode, encode_chat

VERSION = versions.active().reported
ROUTES = {  # path -> methods, for 405 and the `allow` header
    "/health": "GET",
    "/ping": "GET, POST",
    "/version": "GET",
    "/load": "GET",
    "/metrics": "GET",
    "/v1/models": "GET",
    "/tokenize": "POST",
    "/detokenize": "POST",
    "/v1/chat/completions": "POST",
    "/v1/completions": "POST",
    "/v1/responses": "POST",
}
_OPEN_PATHS = ("/health", "/ping", "/version", "/metrics", "/load")
# no answer while the engine sleeps
WEIGHT_ROUTES = ("/v1/chat/completions", "/v1/completions", "/v1/responses")
# vLLM's `validate_json_request` dependency: a body must say `Content-Type: application/json`
JSON_ROUTES = (*WEIGHT_ROUTES, "/tokenize", "/detokenize")
UNSUPPORTED = "1 validation error:\n  Unsupported Media Type: Only 'application/json' is allowed"


class Handler(Generation):
    protocol_version = "HTTP/1.1"
    server_version = "uvicorn"
    sys_version = ""
    # Small writes (headers, then the body; stream chunks) would wait for delayed ACKs (~40 ms
    # each).
    disable_nagle_algorithm = True
    state: ServerState  # set on the subclass made by make_server
    _started = 0.0  # time.monotonic() when _route took the request (the http_* metrics' duration)
    query: dict[str, list[str]] = {}  # noqa: RUF012 - replaced per request by _route
    raw_body = b""  # read by _route before anything answers: a kept-alive connection goes on

    # --- plumbing ---------------------------------------------------------------------------------
    # replaced by uvicorn-style access lines in _send
    def log_message(self, fmt: str, *args: Any) -> None:
        pass

    def version_string(self) -> str:
        return "uvicorn"

    def _send(
        self, status: int, body: bytes = b"", content_type: str | None = None, **headers: str
    ) -> None:
        self.send_response(status)
        self.send_header("content-length", str(len(body)))
        if content_type:
            self.send_header("content-type", content_type)
        for name, value in headers.items():
            self.send_header(name, value)
        # vLLM's CORS middleware answers; its auth check, which runs first, does not
        if status != 401:
            self.send_header("vary", "Origin")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self._access(status, len(body))

    def _json(self, status: int, payload: object, **headers: str) -> None:
        body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
        self._send(status, body, "application/json", **headers)

    def _routes(self) -> dict[str, str]:
        return {**ROUTES, **DEV_ROUTES} if self.state.sleep is not None else ROUTES

    def _access(self, status: int, sent: int = 0) -> None:
        route = self.path if self.path in self._routes() else None
        received = int(self.headers.get("content-length") or 0)
        took = time.monotonic() - self._started
        self.state.metrics.http_request(
            HttpRequest(self.command, route, status, received, sent, took)
        )
        if self.state.access_log:
            phrase = self.responses.get(status, ("",))[0]
            self.state.log(
                "INFO:",
                "",
                f"{self.client_address[0]}:{self.client_address[1]} - "
                f'"{self.command} {self.raw_path} HTTP/1.1" {status} {phrase}',
            )

    def _body(self) -> dict:
        """The JSON body, refused as FastAPI and vLLM refuse it: bad JSON first (parsed whatever the
        content type), then a model route's content type, then the shape."""
        try:
            body = json.loads(self.raw_body or b"{}")
        except json.JSONDecodeError as exc:
            loc = ("body", exc.pos)
            raise validation_error(
                "json_invalid", loc, "JSON decode error", {}, f"body.{exc.pos}", error=exc.msg
            ) from None
        except ValueError as exc:  # not UTF-8
            raise validation_error(
                "json_invalid", ("body", 0), "JSON decode error", {}, "body.0", error=str(exc)
            ) from None
        media = (self.headers.get("content-type") or "").split(";")[0].strip().lower()
        if self.path in JSON_ROUTES and media != "application/json":
            raise RequestError(400, UNSUPPORTED, "Bad Request")
        if not isinstance(body, dict):
            msg = "Input should be a valid dictionary or object to extract fields from"
            raise validation_error("model_attributes_type", ("body",), msg, body, "body")
        return body

    def _authorized(self) -> bool:
        keys = self.state.api_keys
        if not keys or not self.path.startswith(("/v1", "/inference/v1")):
            return True
        header = self.headers.get("authorization") or ""
        return header.startswith("Bearer ") and header[7:] in keys

    # --- routing ----------------------------------------------------------------------------------
    def do_GET(self) -> None:
        self._route(
            {
                "/health": self._health,
                "/ping": self._health,
                "/version": self._version,
                "/load": self._load,
                "/v1/models": self._models,
                "/metrics": self._metrics,
                **({"/is_sleeping": self._is_sleeping} if self.state.sleep else {}),
            }
        )

    def do_POST(self) -> None:
        self._route(
            {
                "/ping": self._health,
                "/tokenize": self._tokenize,
                "/detokenize": self._detokenize,
                "/v1/chat/completions": self._chat,
                "/v1/completions": self._completions,
                "/v1/responses": self._responses,
                **(
                    {
                        "/sleep": self._sleep,
                        "/wake_up": self._wake_up,
                        "/collective_rpc": self._collective_rpc,
                        "/reset_prefix_cache": self._reset_cache,
                        "/reset_mm_cache": self._reset_cache,
                        "/reset_encoder_cache": self._reset_cache,
                    }
                    if self.state.sleep
                    else {}
                ),
            }
        )

    def _route(self, table: dict) -> None:
        self.raw_path = self.path  # the access line shows the query, as uvicorn's does
        path, _, query = self.path.partition("?")
        self.path, self.query = path, parse_qs(query)
        self._started = time.monotonic()
        length = int(self.headers.get("content-length") or 0)
        self.raw_body = self.rfile.read(length) if length else b""
        handler = table.get(path)
        routes = self._routes()
        try:
            if not self._authorized():  # vLLM's middleware, before the routes are looked up
                self._json(401, {"error": "Unauthorized"})
            elif handler is None and path in routes:
                self._json(405, {"detail": "Method Not Allowed"}, allow=routes[path])
            elif handler is None:
                self._json(404, {"detail": "Not Found"})
            elif path not in _OPEN_PATHS and self.command == "POST" and self.state.engine_dead():
                issue = (
                    "EngineCore encountered an issue. See stack trace (above) for the root cause."
                )
                raise RequestError(500, issue, "InternalServerError")
            else:
                with self._weights_in_use(path):
                    handler()
        except RequestError as exc:
            self._json(exc.status, exc.to_json())
        except SleepError as exc:
            self._json(exc.status, RequestError(exc.status, exc.message).to_json())
        except (BrokenPipeError, ConnectionResetError, ClientGone):
            self.close_connection = True

    # --- endpoints --------------------------------------------------------------------------------
    def _health(self) -> None:
        if self.command == "POST":
            self._body()
        self._send(503 if self.state.engine_dead() else 200)

    # --- sleep mode (emulator/sleep.py)
    # -------------------------------------------------------------
    def _sleep(self) -> None:
        assert self.state.sleep is not None
        self._body()
        try:
            level = int((self.query.get("level") or ["1"])[0])
        except ValueError:
            raise SleepError(400, f"Invalid sleep level: {self.query.get('level')}") from None
        self.state.sleep.sleep(level, (self.query.get("mode") or ["abort"])[0], self.state.log)
        self._send(200)

    def _wake_up(self) -> None:
        assert self.state.sleep is not None
        self._body()
        self.state.sleep.wake(self.query.get("tags") or [], self.state.log)
        self.state.info.lora_corrupted = self.state.info.fault == LORA_FAULT  # vLLM issue 53888
        self._send(200)

    def _is_sleeping(self) -> None:
        assert self.state.sleep is not None
        self._json(200, {"is_sleeping": self.state.sleep.sleeping})

    def _collective_rpc(self) -> None:
        assert self.state.sleep is not None
        method = self._body().get("method")
        if method != "reload_weights":
            raise SleepError(
                400, f"collective_rpc: the emulator knows only reload_weights, not {method!r}"
            )
        self.state.sleep.reload_weights(self.state.log)
        self._json(200, {"results": [None]})

    def _reset_cache(self) -> None:
        self._body()
        self._send(200)

    def _version(self) -> None:
        self._json(200, {"version": VERSION})

    def _load(self) -> None:
        self._json(200, {"server_load": self.state.metrics.running})

    def _models(self) -> None:
        info = self.state.info
        created = int(time.time())
        data = [
            {
                "id": name,
                "object": "model",
                "created": created,
                "owned_by": "vllm",
                "root": info.model,
                "parent": None,
                "max_model_len": info.max_model_len,
                "permission": [
                    {
                        "id": f"modelperm-{i}",
                        "object": "model_permission",
                        "created": created,
                        "allow_create_engine": False,
                        "allow_sampling": True,
                        "allow_logprobs": True,
                        "allow_search_indices": False,
                        "allow_view": True,
                        "allow_fine_tuning": False,
                        "organization": "*",
                        "group": None,
                        "is_blocking": False,
                    }
                ],
            }
            for i, name in enumerate(info.served_names)
        ]
        self._json(200, {"object": "list", "data": data})

    def _metrics(self) -> None:
        self._send(200, self.state.metrics.render().encode(), self.state.metrics.content_type)

    def _tokenize(self) -> None:
        body = self._body()
        check_model(body, self.state.info)
        if "messages" in body:
            add_prompt = body.get("add_generation_prompt", True)
            tokens = encode_chat(body["messages"], body.get("tools"), add_prompt)
        elif isinstance(body.get("prompt"), str):
            tokens = encode(body["prompt"])
        else:
            required = "Either `prompt` (a string) or `messages` is required"
            raise RequestError(400, required, param="prompt")
        counted = {"count": len(tokens), "max_model_len": self.state.info.max_model_len}
        self._json(200, {**counted, "tokens": tokens, "token_strs": None})

    @contextlib.contextmanager
    def _weights_in_use(self, path: str) -> Iterator[None]:
        """A request that needs the model: while the engine sleeps it waits for the wake with no
        answer (the real 0.26.0 gave none within 8 s); counted, so /sleep?mode=wait can wait for
        it."""
        if self.state.sleep is None or path not in WEIGHT_ROUTES:
            yield
            return
        if not self.state.sleep.begin_request(self.client_gone):
            raise ClientGone
        try:
            yield
        finally:
            self.state.sleep.end_request()

    def _detokenize(self) -> None:
        self._json(200, completions.detokenize(self._body(), self.state.info))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128


class _Server6(_Server):
    address_family = socket.AF_INET6


def make_server(host: str, port: int, state: ServerState) -> ThreadingHTTPServer:
    """Bind and listen now (the port refuses connections until this is called); serve with
    serve_forever()."""
    handler = type("BoundHandler", (Handler,), {"state": state})
    server_class = _Server6 if ":" in host else _Server
    return server_class((host, port), handler)
