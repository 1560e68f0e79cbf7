"""An aliased stack downed outside a switch (issue 40 item 5), on the real engine: a client through the
TLS listener gets 503 + Retry-After at once (before: ~10 s, Docker's DNS giving up on the removed
container's name, then "(gaierror)"), with a stage saying since when the stack is down; `status`, text and
JSON, shows the alias and that its stack is down; `up` brings it back with no other step."""

from __future__ import annotations

import json
import re
import time

import pytest

from tests.support.edge import EdgeProject, edge_project, serving

pytestmark = pytest.mark.docker

CHAT = {"model": "ds4-flash", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}


@pytest.fixture(scope="module")
def edge(tmp_path_factory, edge_img) -> EdgeProject:
    with serving(edge_project(tmp_path_factory.mktemp("down"), edge_img)) as project:
        yield project


def test_a_downed_stack_is_503_at_once_and_status_says_it_is_down(edge):
    key = edge.ok("keys", "add", "down-client").strip()
    assert edge.request("POST", "/v1/chat/completions", key, CHAT)[0] == 200
    aliases = json.loads(edge.ok("status", "--json"))["aliases"]
    assert aliases == [{"alias": "ds4-flash", "profile": edge.old, "target": "ready"}]
    edge.ok("down", edge.old)
    routes = json.loads((edge.root / ".composegen/edge/routes.json").read_text(encoding="utf-8"))
    downed = routes["aliases"]["ds4-flash"]["down_since"]  # written by `down`: 2026-12-05T05:52:10Z
    since = downed.replace("T", " ").replace("Z", " UTC")
    took = []
    for _ in range(3):
        started = time.monotonic()
        status, headers, body = edge.request("POST", "/v1/chat/completions", key, CHAT)
        took.append(time.monotonic() - started)
        # through TLS, Caddy and the gate; the first includes the gate's bounded name lookup (0.5 s)
        assert took[-1] < 1.5, f"answer {len(took)} took {took[-1]:.2f} s"
        assert status == 503 and headers["Retry-After"] == "1"
        error = json.loads(body)["error"]
        assert re.fullmatch(
            rf"{edge.old} is down since {since} \(its name does not resolve\)", error["stage"]
        ), error["stage"]
        assert "gaierror" not in error["message"] and "Error" not in error["message"]
    res = edge.cli("status")
    assert f"alias ds4-flash → {edge.old} (down)" in res.stdout, res.stdout
    aliases = json.loads(edge.cli("status", "--json").stdout)["aliases"]
    assert aliases == [{"alias": "ds4-flash", "profile": edge.old, "target": "down"}]
    # brought back by hand, it serves again with no other step (the gate forgets "down since")
    edge.ok("up", edge.old, "--emulate")
    assert edge.request("POST", "/v1/chat/completions", key, CHAT)[0] == 200
    print(f"measured: 503 answers through the TLS listener in {[round(t, 3) for t in took]} s")
