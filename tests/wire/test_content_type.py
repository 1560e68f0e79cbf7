"""Every request composegen sends states its content type (issue 48: a real vLLM 0.26.0 answers 400 to a
chat POST without one, and the standby switch's warm-up sent none). wire.http.Peer types every body it
sends; the few request builders outside wire/ are listed here with how each states it, so a new one
fails this test until it goes through wire/ or says how it types its body."""

from __future__ import annotations

import re

from composegen.wire.http import Peer
from tests.support.helpers import REPO
from tests.support.stub_server import Quiet, serving

BUILDER = re.compile(r"\.request\(|HTTP/1\.1\\r\\n|urlopen\(|\.post\(")
# module -> the text by which it states the type of what it sends (None: it sends no body of its own)
OUTSIDE_WIRE = {
    "composegen/edge/exposure.py": '"Content-Type": "application/json"',
    "composegen/bench/stream.py": "Content-Type: application/json",  # the raw bench client
    "composegen/bench/prompts.py": 'post("/tokenize", json=body)',  # httpx types json= bodies
    "composegen/stack/sleepmode.py": "headers={'Content-Type': 'application/json'}",  # in-container
    "composegen/edge/gatekeeper.py": None,  # a proxy: passes on the client's own headers
    "composegen/edge/gate_upstream.py": None,  # the gate's GET /is_sleeping
    "composegen/render.py": None,  # the healthcheck's GET /health
}


def test_every_request_builder_outside_wire_is_listed_with_how_it_types_its_body():
    found = {
        str(path.relative_to(REPO))
        for path in (REPO / "composegen").rglob("*.py")
        if not {"wire", "emulator"} & set(path.parts) and BUILDER.search(path.read_text())
    }
    assert found == set(OUTSIDE_WIRE)
    for module, marker in OUTSIDE_WIRE.items():
        assert marker is None or marker in (REPO / module).read_text(), module


def test_the_peer_types_every_body_and_keeps_a_type_given():
    seen: list[str | None] = []

    class Handler(Quiet):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("content-length") or 0))
            seen.append(self.headers.get("content-type"))
            self.send_response(204)
            self.end_headers()

    with serving(Handler) as server:
        peer = Peer("127.0.0.1", server.server_address[1])
        peer.fetch("POST", "/a", b"{}", deadline_s=10)
        with peer.open(
            "POST", "/b", b"x", deadline_s=10, cap=100, headers={"content-type": "text/plain"}
        ):
            pass
        Peer(peer.host, peer.port, {"Content-Type": "application/x-ndjson"}).fetch(
            "POST", "/c", b"{}", deadline_s=10
        )
    assert seen == ["application/json", "text/plain", "application/x-ndjson"]
