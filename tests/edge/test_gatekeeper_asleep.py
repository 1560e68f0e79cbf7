"""The gate answers for an engine that is asleep (issue 49): 503 + Retry-After + a stage in composegen's words,
never vLLM's own text ("The engine is sleeping; wake it up first (POST /wake_up)." names a route the edge
answers 404) — from routes.json's `asleep_since` mark at once, from a standby engine's sleeping 503 (the
emulated vLLM asleep), and from a standby engine that gives no answer at all while asleep (the real vLLM
0.26.0 on an H200 answered a chat request nothing within 8 s; a stand-in engine plays that)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import select
import urllib.request

import pytest

from composegen.edge import gatekeeper
from tests.edge.test_gatekeeper import exchange
from tests.support.emulator_proc import EmulatorProc
from tests.support.stub_server import Quiet, running, serving

KEY = "cgk_asleep"
CHAT = json.dumps(
    {"model": "ds4", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
)
STAGE = "ds4's engine 4096-131k is asleep since {}; `composegen wake 4096-131k`"


@pytest.fixture
def gate_before(tmp_path):
    """A gatekeeper before UPSTREAM (its one alias), served until the test ends: its port."""

    def start(upstream: str, **extra) -> int:
        state = tmp_path / "state"
        state.mkdir()
        digest = hashlib.sha256(KEY.encode()).hexdigest()
        keys = {"clients": [{"name": "a", "sha256": digest}]}
        (state / "keys.json").write_text(json.dumps(keys))
        route = {"profile": "4096-131k", "upstream": upstream, "served_name": "served", **extra}
        (state / "routes.json").write_text(
            json.dumps({"retry_after": 7, "aliases": {"ds4": route}})
        )
        return stack.enter_context(
            running(gatekeeper.serve(str(state), "127.0.0.1", 0))
        ).server_port

    with contextlib.ExitStack() as stack:
        yield start


def chat(port: int) -> tuple[int, dict[str, str], dict]:
    raw = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: edge\r\nAuthorization: Bearer {KEY}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(CHAT)}\r\n\r\n{CHAT}"
    )
    status, headers, body, _ = exchange(port, raw.encode())
    return status, headers, json.loads(body)


class Silent(Quiet):
    """A stand-in for the real vLLM 0.26.0 asleep: a chat request gets no answer; /is_sleeping says so."""

    protocol_version = "HTTP/1.1"
    seen: list[str]

    def do_GET(self) -> None:
        self.seen.append(self.path)
        self.reply(200, json.dumps({"is_sleeping": True}).encode())

    def do_POST(self) -> None:
        self.seen.append(self.path)
        self.rfile.read(int(self.headers["Content-Length"]))
        select.select([self.connection], [], [], 30)  # silent until the gate gives up on it
        self.close_connection = True


@pytest.fixture
def silent():
    handler = type("Seen", (Silent,), {"seen": []})
    with serving(handler) as server:
        yield server, handler


def test_an_asleep_mark_is_503_at_once_without_asking_the_engine(gate_before, silent):
    server, handler = silent
    since = "2026-12-06T05:00:00Z"
    port = gate_before(f"127.0.0.1:{server.server_port}", standby=True, asleep_since=since)
    status, headers, doc = chat(port)
    assert (status, headers["retry-after"]) == (503, "7")
    assert doc["error"]["stage"] == STAGE.format("2026-12-06 05:00:00 UTC")
    assert handler.seen == []


def test_a_standby_engine_silent_while_asleep_is_503_in_composegens_words(gate_before, silent):
    server, handler = silent
    port = gate_before(f"127.0.0.1:{server.server_port}", standby=True)
    status, headers, doc = chat(port)
    assert (status, headers["retry-after"]) == (503, "7"), doc
    stage = doc["error"]["stage"]
    assert (
        stage.startswith("ds4's engine 4096-131k is asleep since ")
        and "composegen wake 4096-131k" in stage
    )
    assert handler.seen == ["/v1/chat/completions", "/is_sleeping"]


def test_the_emulated_engine_asleep_is_never_relayed_in_its_own_words(tmp_path, gate_before):
    with EmulatorProc.start(
        tmp_path, extra_args=("--enable-sleep-mode",), env={"VLLM_SERVER_DEV_MODE": "1"}
    ) as emu:
        asleep = urllib.request.Request(f"{emu.base_url}/sleep?level=1", b"", method="POST")
        assert urllib.request.urlopen(asleep, timeout=30).status == 200
        port = gate_before(f"127.0.0.1:{emu.port}", standby=True)
        status, headers, doc = chat(port)
    assert (status, headers["retry-after"]) == (503, "7"), doc
    message = doc["error"]["message"]
    assert (
        "composegen wake 4096-131k" in message
        and "wake_up" not in message
        and "sleeping" not in message
    )
