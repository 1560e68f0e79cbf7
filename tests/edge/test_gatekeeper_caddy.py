"""The edge's Caddy blocks run by Debian's real caddy (2.6.2, the binary the edge image ships), without Docker:
the proxy's hop to the gatekeeper in front of the gate and the emulated vLLM (a client that hangs up on a
NON-streamed request ends the upstream request; issue 48), and the operator door's allowlist against every
route vLLM 0.26.0 printed (dev mode on) and the dev routes 0.33.0 adds, in every spelling (issue 49)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from composegen.edge import gatekeeper, render
from tests.support.emulator_proc import EmulatorProc
from tests.support.ports import free_port
from tests.support.stub_server import Quiet, running, serving

SLEEP_LOG = Path(__file__).resolve().parents[1] / "data" / "real-0.26.0-h200-sleep" / "serve-a.log"
RECORDED = Path(__file__).resolve().parents[1] / "data" / "real-0.26.0-h200-apikey-routes"
# the dev-mode routes vLLM 0.33.0 adds to 0.26.0's (issue 49, read from vLLM's source)
ADDED_IN_0_33 = (
    "/release_kv_cache_memory",
    "/update_weight_version",
    "/weight_info",
    "/weight_checker",
    "/shutdown_weight_transfer_engine",
)
KEY = "cgk_caddy-test"
pytestmark = pytest.mark.skipif(
    shutil.which("caddy") is None, reason="no caddy (provision.d/70-caddy.sh)"
)


@contextlib.contextmanager
def caddy(tmp: Path, site: list[str]) -> Iterator[int]:
    """The real caddy serving SITE (its first line gets the listener) on a free loopback port."""
    port = free_port()
    lines = ["{", "\tadmin off", "\tauto_https off", render._timeouts(), "}"]
    lines += [f"http://:{port} {{", "\tbind 127.0.0.1", *site]
    (tmp / "Caddyfile").write_text("\n".join(lines) + "\n")
    with open(tmp / "caddy.log", "wb") as log:
        proc = subprocess.Popen(
            ["caddy", "run", "--config", str(tmp / "Caddyfile"), "--adapter", "caddyfile"],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 20
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            assert proc.poll() is None and time.monotonic() < deadline, (
                tmp / "caddy.log"
            ).read_text()
            time.sleep(0.05)
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


class Tap:
    """A TCP relay between the gate and the engine: when each connection the gate opened was closed by the
    gate (its request ended from our side)."""

    def __init__(self, target: int) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port, self.target = self.listener.getsockname()[1], target
        self.opened: list[float] = []
        self.closed: list[float] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            gate, _ = self.listener.accept()
            engine = socket.create_connection(("127.0.0.1", self.target))
            self.opened.append(time.monotonic())
            threading.Thread(target=self._pipe, args=(engine, gate, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(gate, engine, True), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, from_gate: bool) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        if from_gate:
            self.closed.append(time.monotonic())
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


@pytest.fixture
def chain(tmp_path):
    """client → real caddy (the proxy's hop) → gatekeeper → tap → emulated vLLM (slow decode: 3000 tokens
    take 15 s)."""
    env = {"EMU_DECODE_TOK_S": "200", "EMU_DECODE_SLEEP_CAP_S": "60"}
    with EmulatorProc.start(tmp_path, env=env) as emu:
        tap = Tap(emu.port)
        state = tmp_path / "state"
        state.mkdir()
        digest = hashlib.sha256(KEY.encode()).hexdigest()
        (state / "keys.json").write_text(json.dumps({"clients": [{"name": "a", "sha256": digest}]}))
        route = {
            "profile": "4096-131k",
            "upstream": f"127.0.0.1:{tap.port}",
            "served_name": emu.model,
        }
        (state / "routes.json").write_text(
            json.dumps({"retry_after": 7, "aliases": {"ds4": route}})
        )
        gate = gatekeeper.serve(str(state), "127.0.0.1", 0)
        with (
            running(gate),
            caddy(
                tmp_path, [*render.gate_proxy(f"127.0.0.1:{gate.server_port}", "\t"), "}"]
            ) as port,
        ):
            yield port, tap, emu


def _chat(stream: bool, max_tokens: int = 3000) -> bytes:
    doc = {
        "model": "ds4",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "stream": stream,
    }
    body = json.dumps(doc).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: edge\r\nAuthorization: Bearer {KEY}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


@pytest.mark.parametrize("stream", [False, True])
def test_a_hang_up_through_caddy_ends_the_upstream_request(chain, stream, capsys):
    port, tap, _ = chain
    with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
        client.sendall(_chat(False, max_tokens=2))  # leaves the gate a kept-alive engine connection
        assert client.recv(65536).startswith(b"HTTP/1.1 200")
    client = socket.create_connection(("127.0.0.1", port), timeout=10)
    client.sendall(_chat(stream))
    if stream:
        assert client.recv(65536).startswith(b"HTTP/1.1 200")
    time.sleep(0.5)  # the engine is generating (15 s of it) on the reused connection
    assert tap.closed == [] and len(tap.opened) == 1
    client.close()
    hung_up = time.monotonic()
    while not tap.closed and time.monotonic() < hung_up + 5:
        time.sleep(0.01)
    assert tap.closed, "the gate kept the request running after its client hung up"
    assert tap.closed[0] - hung_up < 1.0
    time.sleep(0.3)
    # never sent again on a fresh connection (nobody is left to answer), and logged as the client's doing
    assert len(tap.opened) == 1, tap.opened
    log = capsys.readouterr().out
    assert "not answering" not in log, log
    # a stream's head went out (200): a non-streamed request had no answer yet
    assert ('"POST /v1/chat/completions" 499' in log) is not stream, log


def _recorded_routes() -> set[str]:
    lines = SLEEP_LOG.read_text().splitlines()
    lines += (RECORDED / "serve-apikey-two-names-eager.log").read_text().splitlines()
    return {line.split("Route: ", 1)[1].split(",", 1)[0] for line in lines if "Route: " in line}


def _spellings(path: str) -> list[str]:
    """The ways a client may spell PATH that Starlette still routes to it (or that a lax filter lets by)."""
    first = path[1]
    return [
        path,
        path.upper(),
        path.title(),
        path + "/",
        path + "%0a",
        path + "%0A",
        path + "%0d%0a",
        path + "?x=1",
        path + "%3f",
        "/" + f"%{ord(first):02x}" + path[2:],
        path.replace("_", "%5f"),
        "/." + path,
        "/" + path,
        "/v1/models/.." + path,
        "/v1/models/..%2f" + path[1:],
        "/v1/models/%2e%2e" + path,
        path + "/.",
        path + "%20",
        "/health/../" + path[1:],
    ]


class Recording(Quiet):
    seen: list[str]

    def _answer(self) -> None:
        self.seen.append(self.path)
        self.reply(200, b"")

    do_GET = do_POST = do_PUT = do_DELETE = _answer


def _reached(path: str) -> str:
    """What Starlette matches a raw request path against: percent-decoded, the query gone; its routes'
    regexes end in `$`, which also matches before a final newline, and a trailing slash is redirected
    (lower-cased: a filter that cared about case would be wrong the other way)."""
    decoded = urllib.parse.unquote(path.split("?", 1)[0])
    return (decoded.removesuffix("\n").rstrip("/") or "/").lower()


def test_the_operator_door_passes_only_its_allowlist_in_every_spelling(tmp_path):
    with serving(type("Stack", (Recording,), {"seen": []})) as stack:
        routes = _recorded_routes() | set(ADDED_IN_0_33)
        assert (
            len(routes) >= 50
            and {"/sleep", "/wake_up", "/collective_rpc", "/server_info"} <= routes
        )
        served = {p for p in render.DOOR_PATHS if not p.endswith("/*")}
        site = render.operator_site([], f"127.0.0.1:{stack.server_port}")
        with caddy(tmp_path, site) as port:
            for path in sorted(routes):
                for method in ("GET", "POST"):
                    for spelled in _spellings(path):
                        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                            sock.sendall(
                                f"{method} {spelled} HTTP/1.1\r\nHost: door\r\nContent-Length: 0\r\n\r\n".encode()
                            )
                            answer = sock.recv(65536)
                        assert answer.startswith(
                            (b"HTTP/1.1 200", b"HTTP/1.1 404", b"HTTP/1.1 400")
                        ), (
                            spelled,
                            answer,
                        )
    reached = {_reached(p) for p in stack.RequestHandlerClass.seen}  # type: ignore[attr-defined]
    closed = {
        p.lower() for p in routes - served if not p.startswith("/v1/responses/")
    }  # served: /*
    leaked = reached & closed
    assert not leaked, sorted(leaked)
    assert served & routes <= reached  # what the door serves still passes
