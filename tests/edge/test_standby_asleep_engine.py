"""Every way to sleep the alias's own engine outside a switch (issue 49): `qualify A --sleep-cycles N`
and `up A --standby` on the stack the alias serves. The alias is marked before the engine sleeps: a
client polling it through TLS only ever gets A's model or 503 + Retry-After + composegen's stage
("… is asleep since …; `composegen wake A`"), never the engine's own sleeping text. `up A --standby`
is refused (the candidate `--standby` first in the hint) unless `--sleep-alias`; `wake A` puts it back
in service with a switch's steps; a kill -9 mid-cycles leaves the journal `edge recover` undoes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.support.edge import EdgeProject, Poller, edge_project, serving
from tests.support.helpers import REPO

pytestmark = pytest.mark.docker
CHAT = {"model": "ds4-flash", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}


@pytest.fixture(scope="module")
def edge(tmp_path_factory, edge_img):
    project = edge_project(tmp_path_factory.mktemp("standby-asleep"), edge_img, load=2, standby=True,
                           share=0.45, both_env={"EMU_WEIGHTS_GIB": "0.0043", "EMU_WAKE_S": "0.5"})  # fmt: skip
    with serving(project) as ready:
        yield ready


def _answers_told(poller: Poller, model: str) -> None:
    """Each answer: MODEL, or 503 + Retry-After + composegen's own stage."""
    wrong = [s for s in poller.seen if s[0] == 200 and s[2] != model]
    untold = [s for s in poller.seen
              if s[0] != 200 and not (s[0] == 503 and s[1] and isinstance(s[2], str))]  # fmt: skip
    assert not wrong and not untold, (wrong[:3], untold[:3])


def _killed_in_cycles(edge: EdgeProject) -> None:
    journal = edge.root / ".composegen/edge/switch.json"
    argv = [sys.executable, "-m", "composegen", "--root", str(edge.root), "qualify", edge.old,
            "--sleep-cycles", "50"]  # fmt: skip
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not journal.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.returncode
            time.sleep(0.01)
        time.sleep(1.5)  # a few cycles in
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_sleeping_the_alias_s_own_engine_is_marked_refused_or_woken(edge):
    model = f"{edge.old}-served"
    key = edge.ok("edge", "keys", "add", "asleep").strip()
    poller = Poller(edge, key)
    poller.start()
    try:
        poller.wait_for(3)
        # exit 1: the tiny profile has no tool parser (the tools gate); the cycles are what count
        cycles = edge.cli("qualify", edge.old, "--sleep-cycles", "4", "--json", timeout=600)
        done = json.loads(cycles.stdout)
        assert done["sleep"]["passed"], done["sleep"]
        refused = edge.cli("up", edge.old, "--emulate", "--standby")
        assert refused.returncode == 2, refused.stderr
        hint = refused.stderr
        assert hint.index("`composegen up OTHER --standby`") < hint.index(
            "composegen promote OTHER"
        )
        edge.ok("up", edge.old, "--emulate", "--standby", "--sleep-alias", timeout=600)
        code, headers, data = edge.request("POST", "/v1/chat/completions", key, CHAT)
        stage = json.loads(data)["error"]["stage"]
        assert code == 503 and headers.get("Retry-After"), (code, data)
        assert f"ds4-flash's engine {edge.old} is asleep since" in stage, stage
        assert f"`composegen wake {edge.old}`" in stage, stage
        woken = json.loads(edge.ok("wake", edge.old, "--json", timeout=600))
        assert woken["action"] == f"{edge.old} woken", woken
        assert woken["stages"][-4:] == [f"waking {edge.old}", "warm-up", "identity",
                                                 f"gates on {edge.old}"]  # fmt: skip
        _killed_in_cycles(edge)
        assert json.loads(edge.ok("edge", "status", "--json"))["aliases"][0]["interrupted"]
        recovered = json.loads(edge.ok("edge", "recover", "--json", timeout=600))
        assert recovered["action"] == f"undone: {edge.old} woken, serving again", recovered
        count = len(poller.seen)
        poller.wait_for(count + 3)
    finally:
        poller.stop.set()
        poller.join(60)
    _answers_told(poller, model)
    assert poller.seen[-1][0] == 200
