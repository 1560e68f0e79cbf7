"""A stack that is down outside a switch (issue 40 item 5), in-process, without Docker: the gate
answers its clients at once with 503 + Retry-After and a stage in composegen's words ("… is down
since …"), never after the ~10 s Docker's DNS takes to give up on a removed container's name, and
never with a Python exception name."""

from __future__ import annotations

import hashlib
import json
import re
import socket
import time

import pytest

from composegen.edge import gatekeeper
from tests.edge.test_gatekeeper import (
    KEY,
    SERVED,
    Upstream,
    chat,
    exchange,
    request,
    write_keys,
    write_routes,
)
from tests.support.stub_server import running, serving

# what Docker's embedded DNS did for a removed stack's name on the edge's internal network
# (measured in a container on Docker 20.10: getaddrinfo failed after 10.01 s, EAI_AGAIN)
DOCKER_DNS_GIVES_UP_S = 10.0
SINCE = re.compile(r"4096-131k is down since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")


@pytest.fixture
def gate(tmp_path, monkeypatch):
    real = socket.getaddrinfo

    def docker_dns(host, *args, **kwargs):  # a removed stack's name: a slow failure
        if str(host).startswith("stack-"):
            time.sleep(DOCKER_DNS_GIVES_UP_S)
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", docker_dns)
    state = tmp_path / "state"
    state.mkdir()
    digest = hashlib.sha256(KEY.encode()).hexdigest()
    write_keys(state, [{"name": "alice", "sha256": digest, "revoked": None}])
    server = gatekeeper.serve(str(state), "127.0.0.1", 0)
    with running(server):
        yield server.server_port, state


def timed_chat(port: int) -> tuple[float, int, dict[str, str], dict]:
    started = time.monotonic()
    status, headers, body, _ = exchange(port, request("POST", "/v1/chat/completions", chat()))
    return time.monotonic() - started, status, headers, json.loads(body)["error"]


def test_a_stack_whose_name_does_not_resolve_is_503_at_once_with_since_when(gate):
    port, state = gate
    route = {"profile": "4096-131k", "upstream": "stack-4096-131k:8000", "served_name": SERVED}
    write_routes(state, {"ds4": route})
    took, status, headers, error = timed_chat(port)
    # before: the client waited for the resolver to give up (10 s), then read "(gaierror)"
    assert took < 1.0, f"the first client waited {took:.2f} s"
    assert status == 503 and headers["retry-after"] == "7"
    assert SINCE.fullmatch(error["stage"].split(" (")[0]), error["stage"]
    assert "Error" not in error["message"] and "gaierror" not in error["message"]
    # the next clients: at once, and the same "since" (the first failure, not each one)
    again = [timed_chat(port) for _ in range(5)]
    assert max(t for t, *_ in again) < 0.5
    assert {e["stage"] for *_, e in again} == {error["stage"]}


def test_a_refused_stack_says_since_when_it_has_not_answered(gate):
    port, state = gate
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    route = {"profile": "4096-131k", "upstream": f"127.0.0.1:{closed}", "served_name": SERVED}
    write_routes(state, {"ds4": route})
    took, status, _, error = timed_chat(port)
    assert took < 1.0 and status == 503
    assert re.fullmatch(
        r"4096-131k is not answering since \S+ \S+ UTC "
        r"\(connection refused: the engine is not listening\)",
        error["stage"],
    ), error["stage"]
    # the stack comes back on its port: served at once, and "since" is forgotten
    handler = type("Back", (Upstream,), {"seen": [], "gone_at": [], "conns": []})
    with serving(handler, closed):
        status, _, body, _ = exchange(port, request("POST", "/v1/chat/completions", chat()))
    assert status == 200 and json.loads(body)["model"] == SERVED


def test_the_time_composegen_downed_the_stack_is_the_since(gate):
    port, state = gate
    route = {"profile": "4096-131k", "upstream": "stack-4096-131k:8000", "served_name": SERVED}
    write_routes(state, {"ds4": {**route, "down_since": "2026-12-05T04:00:00Z"}})
    took, status, _, error = timed_chat(port)
    assert took < 1.0 and status == 503
    assert error["stage"].startswith("4096-131k is down since 2026-12-05 04:00:00 UTC"), error
    # a time that is not one is never shown: the gate's own first failure instead
    write_routes(state, {"ds4": {**route, "down_since": "yesterday"}})
    assert SINCE.fullmatch(timed_chat(port)[3]["stage"].split(" (")[0])
    assert "yesterday" not in timed_chat(port)[3]["message"]
