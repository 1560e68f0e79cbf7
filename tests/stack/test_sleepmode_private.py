"""stack/sleepmode.py reaches the dev routes over the stack's private network: the engine's own
listener at the container's address when this machine sits on that network's bridge (the
connection's local address is the network's gateway), else a `docker exec` inside the container —
never for a remote engine's addresses, which are on its own bridges. A real listener on this
machine's loopback stands in for the container's address (127.0.0.1 is then its own gateway); the
exec is recorded instead of run."""

from __future__ import annotations

import json
import socket
from typing import ClassVar

import pytest

from composegen.stack import sleepmode
from composegen.stack.facts import ContainerFacts, NetworkAddress, parse_container
from composegen.stack.targets import Target
from tests.support.stub_server import Quiet, serving


class _Engine(Quiet):
    seen: ClassVar[list[tuple[str, str, bytes]]] = []

    def _answer(self, body: dict) -> None:
        self.reply(200, json.dumps(body).encode(), {"Content-Type": "application/json"})

    def do_GET(self) -> None:
        self.seen.append(("GET", self.path, b""))
        self._answer({"is_sleeping": True})

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.seen.append(("POST", self.path, body))
        self._answer({})


@pytest.fixture
def engine():
    _Engine.seen = []
    with serving(_Engine) as server:
        yield server.server_port


@pytest.fixture
def execs(monkeypatch):
    calls: list[list[str]] = []

    def exec_output(ctr, argv, max_bytes=1 << 20):
        calls.append(argv)
        return 0, '200\n{"is_sleeping": false}'

    monkeypatch.setattr(sleepmode.engine, "exec_output", exec_output)
    monkeypatch.setattr(sleepmode, "_reachable", {})
    return calls


LOCAL = Target()


def _ctr(
    cid: str, addresses: tuple[str, ...], target: Target = LOCAL, gateway: str = "127.0.0.1"
) -> ContainerFacts:
    nets = tuple(NetworkAddress(f"net{i}", a, gateway) for i, a in enumerate(addresses))
    return ContainerFacts(id=cid, name=f"ctr-{cid}", state="running", running=True, health=None,
                          restarts=0, exit_code=None, started_at=None, labels={}, image_id="",
                          networks=tuple(n.network for n in nets), host_port=None, target=target,
                          addresses=nets)  # fmt: skip


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens once it is closed


def test_a_local_engine_s_container_is_called_at_its_address_without_an_exec(
    engine, execs, monkeypatch
):
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.delenv("DOCKER_CONTEXT", raising=False)
    ctr = _ctr("a1", ("127.0.0.1",))
    assert sleepmode.is_sleeping(ctr, engine) is True
    sleepmode._ok(ctr, engine, sleepmode._DevCall("POST", "/sleep?level=1&mode=wait"))
    assert _Engine.seen == [
        ("GET", "/is_sleeping", b""),
        ("POST", "/sleep?level=1&mode=wait", b"{}"),
    ]
    assert execs == []


def test_an_address_that_does_not_connect_falls_back_to_an_exec_inside_the_container(
    execs, monkeypatch
):
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.delenv("DOCKER_CONTEXT", raising=False)
    ctr = _ctr("b2", ("127.0.0.1",))
    assert sleepmode.is_sleeping(ctr, _closed_port()) is False
    assert len(execs) == 1 and execs[0][:3] == ["python3", "-I", "-c"]
    assert execs[0][4].startswith("http://127.0.0.1:") and execs[0][4].endswith(
        "/is_sleeping"
    )  # the in-container client's URL: 127.0.0.1:PORT


def test_a_remote_engine_s_addresses_are_never_tried(engine, execs):
    ctr = _ctr("c3", ("127.0.0.1",), Target(host="tcp://192.0.2.10:2376"))
    assert sleepmode.is_sleeping(ctr, engine) is False  # the exec's answer, not the listener's
    assert _Engine.seen == [] and len(execs) == 1


@pytest.fixture
def local(monkeypatch):
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.delenv("DOCKER_CONTEXT", raising=False)


def test_an_address_that_connects_but_not_from_its_network_s_gateway_is_not_trusted(
    engine, execs, local
):
    # rootless docker, Docker Desktop, colima: the bridge is elsewhere and 172.x routes to some
    # other host; here the listener answers, but not from the gateway the engine named
    ctr = _ctr("d4", ("127.0.0.1",), gateway="172.17.0.1")
    assert sleepmode.is_sleeping(ctr, engine) is False  # the exec's answer
    assert _Engine.seen == [] and len(execs) == 1
    assert sleepmode._reachable == {("d4", "127.0.0.1", engine): False}


def test_a_peer_that_stops_connecting_after_a_good_probe_falls_back_to_the_exec(execs, local):
    with serving(_Engine) as server:
        port = server.server_port
        ctr = _ctr("e5", ("127.0.0.1",))
        assert sleepmode.is_sleeping(ctr, port) is True and execs == []  # the listener's answer
    # the address now refuses: the cached True must not stick
    sleepmode._ok(ctr, port, sleepmode._DevCall("POST", "/sleep?level=1&mode=wait"))
    assert len(execs) == 1 and execs[0][4].endswith("/sleep?level=1&mode=wait")
    assert sleepmode._reachable == {("e5", "127.0.0.1", port): False}


def test_a_network_without_an_address_leaves_the_others_paired_with_their_gateways(
    engine, execs, local
):
    inspect = {
        "Id": "f6",
        "State": {"Status": "running", "Running": True},
        "NetworkSettings": {
            "Networks": {
                "a-host": {"IPAddress": "", "Gateway": ""},
                "b-private": {"IPAddress": "127.0.0.1", "Gateway": "127.0.0.1"},
                "c-other": {"IPAddress": "10.9.0.2", "Gateway": "10.9.0.1"},
            }
        },
    }
    ctr = parse_container(inspect, LOCAL)
    assert ctr.networks == ("a-host", "b-private", "c-other")
    assert ctr.addresses == (
        NetworkAddress("b-private", "127.0.0.1", "127.0.0.1"),
        NetworkAddress("c-other", "10.9.0.2", "10.9.0.1"),
    )
    assert sleepmode.is_sleeping(ctr, engine) is True and execs == []
