"""Ctrl-C (and SIGTERM) at every step of a standby promote or rollback (issue 49): draining, putting OLD
to sleep, waking NEW, warm-up, identity and gates on NEW, composegen either puts the old engine awake
again with the alias on it before it ends, or leaves the journal (and the 503 mark) for `edge recover`.
Never the alias on a sleeping engine with no mark and nothing to recover. Real Docker, the real edge, the
emulated vLLM with slow sleeps, wakes and decoding, so each step lasts long enough to be interrupted in:
draining lasts while a client's long answer decodes (as on any busy engine); identity is one /v1/models
request of a few ms, so its Ctrl-C is raised in-process as the step begins."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from unittest import mock

import pytest

from composegen.edge import standby
from tests.edge.test_standby_engine import Stream
from tests.edge.test_switch_engine import decide
from tests.support import cli
from tests.support.edge import EdgeProject, Poller, edge_project, phases, serving
from tests.support.helpers import REPO

pytestmark = pytest.mark.docker
CHAT = {"model": "ds4-flash", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}


@pytest.fixture(scope="module")
def edge(tmp_path_factory, edge_img):
    project = edge_project(tmp_path_factory.mktemp("standby-int"), edge_img, load=2, standby=True,
                           share=0.45, both_env={"EMU_WEIGHTS_GIB": "0.0043", "EMU_WAKE_S": "1.5",
                                                 "EMU_DECODE_TOK_S": "4", "EMU_SLEEP_S": "1.5"})  # fmt: skip
    with serving(project) as ready:
        ready.ok("up", ready.new, "--emulate", "--standby", timeout=600)
        yield ready


def _interrupted_at(
    edge: EdgeProject, prefix: str, sig: int, *args: str, after_s: float = 0.0
) -> subprocess.CompletedProcess:
    """`composegen ARGS`, sent SIG AFTER_S once its journal's step starts with PREFIX; how it ended."""
    journal = edge.root / ".composegen/edge/switch.json"
    proc = subprocess.Popen([sys.executable, "-m", "composegen", "--root", str(edge.root), *args], cwd=REPO,
                            env={**os.environ, "NO_COLOR": "1"}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                step = str(json.loads(journal.read_text()).get("step", ""))
            except (OSError, ValueError):
                step = ""
            if step.startswith(prefix):
                time.sleep(after_s)
                proc.send_signal(sig)
                out, err = proc.communicate(timeout=300)
                return subprocess.CompletedProcess(args, proc.returncode, out, err)
            time.sleep(0.005)
        pytest.fail(f"{args} never reached {prefix!r} (exit {proc.poll()})")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


def _while_decoding(
    edge: EdgeProject, key: str, model: str, *args: str
) -> subprocess.CompletedProcess:
    """`composegen ARGS` interrupted at draining, the alias's engine decoding a client's long answer
    (40 tokens at 4/s): the answer ends as asked, on MODEL (an interrupted drain aborts nothing)."""
    stream = Stream(edge, key, max_tokens=40)
    stream.start()
    assert stream.decoding.wait(60), "the long answer never began"
    res = _interrupted_at(edge, "draining", signal.SIGINT, *args)
    stream.join(120)
    assert (stream.finish, stream.tokens, stream.model) == ("length", 40, model), vars(stream)
    return res


def _at_identity(edge: EdgeProject, *args: str) -> subprocess.CompletedProcess:
    """`composegen ARGS` in this process, Ctrl-C (Python's own SIGINT handler) as its first identity
    step begins; the journal said "identity" then."""
    journal, real, at = edge.root / ".composegen/edge/switch.json", standby.identity, []

    def identity(r):
        if not at:
            at.append(json.loads(journal.read_text())["step"])
            signal.raise_signal(signal.SIGINT)
        real(r)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with mock.patch.object(standby, "identity", identity):
            res = cli.run_cli("--root", str(edge.root), *args)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert at == ["identity"], at
    return res


def _serves(edge: EdgeProject, key: str, profile: str) -> None:
    """PROFILE serves the alias awake (after `edge recover` when the switch left its journal)."""
    journal = edge.root / ".composegen/edge/switch.json"
    if journal.exists():
        assert json.loads(edge.ok("edge", "status", "--json"))["aliases"][0]["interrupted"]
        code, headers, data = edge.request("POST", "/v1/chat/completions", key, CHAT)
        assert code == 503 and headers.get("Retry-After"), (code, data)
        assert "edge recover" in json.loads(data)["error"]["stage"], data
        assert json.loads(edge.ok("edge", "recover", "--json", timeout=600))["action"].startswith(
            "undone"
        )
    code, _, data = edge.request("POST", "/v1/chat/completions", key, CHAT, timeout=60)
    assert code == 200 and json.loads(data)["model"] == f"{profile}-served", (code, data)
    assert not journal.exists()
    sleeping = {s["profile"]: s["endpoint"]["sleeping"]
                for s in json.loads(edge.ok("status", "--json"))["stacks"]}  # fmt: skip
    assert sleeping[profile] is None, sleeping


def test_ctrl_c_and_sigterm_at_every_step_leave_the_old_engine_awake_or_recoverable(edge):
    old_model, new_model = f"{edge.old}-served", f"{edge.new}-served"
    decide(edge, "c1", edge.new)
    key = edge.ok("edge", "keys", "add", "int").strip()
    promote = ("promote", edge.new, "--alias", "ds4-flash", "--campaign", "c1", "--emulate")
    rollback = ("rollback", "ds4-flash", "--emulate")
    # a client polls the alias through TLS during every interrupted step and every `edge recover`
    with Poller(edge, key, pause_s=0.5) as poller:
        poller.wait_for(1)
        res = _while_decoding(edge, key, old_model, *promote)
        assert res.returncode == 130, ("draining", res.returncode, res.stderr)
        _serves(edge, key, edge.old)
        # putting: 0.5 s into the 1.5 s /sleep, the engine falling asleep (it said "awake" until done)
        for prefix, sig, after_s in (("putting", signal.SIGINT, 0.5), ("waking", signal.SIGINT, 0),
                                     ("warm-up", signal.SIGINT, 0), ("gates on", signal.SIGINT, 0),
                                     ("waking", signal.SIGTERM, 0)):  # fmt: skip
            res = _interrupted_at(edge, prefix, sig, *promote, after_s=after_s)
            assert res.returncode in (130, 143), (prefix, res.returncode, res.stderr)
            _serves(edge, key, edge.old)
        res = _at_identity(edge, *promote)
        assert res.returncode == 130, ("identity", res.returncode, res.stderr)
        _serves(edge, key, edge.old)
        # never the new model before a promote went through; never an untold answer
        assert not poller.untold(old_model), poller.untold(old_model)[:5]
        edge.ok(*promote, timeout=600)
        poller.wait_for(len(poller.seen) + 2)
        res = _while_decoding(edge, key, new_model, *rollback)
        assert res.returncode == 130, ("draining", res.returncode, res.stderr)
        _serves(edge, key, edge.new)
        for prefix, after_s in (("putting", 0.5), ("waking", 0), ("gates on", 0)):
            res = _interrupted_at(edge, prefix, signal.SIGINT, *rollback, after_s=after_s)
            assert res.returncode == 130, (prefix, res.returncode, res.stderr)
            _serves(edge, key, edge.new)
        res = _at_identity(edge, *rollback)
        assert res.returncode == 130, ("identity", res.returncode, res.stderr)
        _serves(edge, key, edge.new)
        poller.wait_for(len(poller.seen) + 2)
    assert not poller.untold(old_model, new_model), poller.untold(old_model, new_model)[:5]
    # each interrupted step told (503), the engine put back serving after each
    assert phases(poller.seen) == [old_model, "503"] * 8 + [new_model, "503"] * 5 + [new_model]
