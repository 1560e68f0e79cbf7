"""Ctrl-C (and SIGTERM) at every step of a standby promote or rollback (issue 49): draining, putting OLD
to sleep, waking NEW, warm-up, identity and gates on NEW, composegen either puts the old engine awake
again with the alias on it before it ends (exit 130/143, "ALIAS points at OLD again", no journal), or,
when a second Ctrl-C cuts that undo short, leaves the journal (and the 503 mark) for `edge recover`.
Never the alias on a sleeping engine with no mark and nothing to recover. Real Docker, the real edge, the
emulated vLLM with slow sleeps, wakes and decoding, so each step lasts long enough to be interrupted in.

Which signal lands where: promote — SIGINT at draining, putting, waking, warm-up, identity, gates, and
SIGTERM at waking; rollback — SIGINT at draining, putting, waking (then a second one as the undo wakes
the serving engine: the journal is left), identity, gates. Draining lasts while a client's long answer
decodes (250 tokens at 10/s: 25 s, under DRAIN_S; asserted still running when the signal is sent); the
others a real process is sent as its journal names the step, except the two whose moment a process
outside cannot hit: identity (one /v1/models request of a few ms) gets Ctrl-C as it begins, and
putting gets it while the real /sleep is in flight (asserted), both in this process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from unittest import mock

import pytest

from composegen.edge import standby
from composegen.stack import sleepmode
from tests.edge.test_standby_engine import Stream
from tests.edge.test_switch_engine import decide
from tests.support import cli
from tests.support.edge import EdgeProject, Poller, edge_project, phases, serving
from tests.support.helpers import REPO

pytestmark = pytest.mark.docker
CHAT = {"model": "ds4-flash", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
# the emulator caps a request's decoding at EMU_DECODE_SLEEP_CAP_S (2 s by default: a 40-token answer
# took 2 s, not 10): raised here, at 10 tokens/s (the warm-up's 16 tokens: 1.6 s)
DECODE = {"EMU_DECODE_TOK_S": "10", "EMU_DECODE_SLEEP_CAP_S": "25"}
LONG = 250  # tokens of the answer decoding through a drain: 25 s (DRAIN_S is 30)
assert LONG / float(DECODE["EMU_DECODE_TOK_S"]) < standby.DRAIN_S


@pytest.fixture(scope="module")
def edge(tmp_path_factory, edge_img):
    project = edge_project(tmp_path_factory.mktemp("standby-int"), edge_img, load=2, standby=True,
                           share=0.45, both_env={"EMU_WEIGHTS_GIB": "0.0043", "EMU_WAKE_S": "1.5",
                                                 "EMU_SLEEP_S": "1.5", **DECODE})  # fmt: skip
    with serving(project) as ready:
        ready.ok("up", ready.new, "--emulate", "--standby", timeout=600)
        yield ready


def _journal(edge: EdgeProject):
    return edge.root / ".composegen/edge/switch.json"


def _interrupted_at(
    edge: EdgeProject, signals: list[tuple[str, int]], *args: str, stream: Stream | None = None
) -> subprocess.CompletedProcess:
    """`composegen ARGS`, sent each (PREFIX, SIG) of SIGNALS in turn once its journal's step starts
    with PREFIX (STREAM: still decoding when the first is sent); how it ended."""
    proc = subprocess.Popen([sys.executable, "-m", "composegen", "--root", str(edge.root), *args], cwd=REPO,
                            env={**os.environ, "NO_COLOR": "1"}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        deadline, todo = time.monotonic() + 240, list(signals)
        while time.monotonic() < deadline and proc.poll() is None and todo:
            try:
                step = str(json.loads(_journal(edge).read_text()).get("step", ""))
            except (OSError, ValueError):
                step = ""
            if step.startswith(todo[0][0]):
                if stream is not None and len(todo) == len(signals):
                    said = (
                        stream.finish,
                        stream.tokens,
                        stream.model,
                        time.monotonic() - stream.began,
                    )
                    assert stream.is_alive() and stream.finish is None, said
                proc.send_signal(todo.pop(0)[1])
            time.sleep(0.005)
        if todo:
            pytest.fail(f"{args} never reached {todo[0][0]!r} (exit {proc.poll()})")
        out, err = proc.communicate(timeout=300)
        return subprocess.CompletedProcess(args, proc.returncode, out, err)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


def _while_decoding(
    edge: EdgeProject, key: str, model: str, *args: str
) -> subprocess.CompletedProcess:
    """`composegen ARGS` interrupted at draining, the alias's engine decoding a client's long answer:
    the answer ends as asked, on MODEL (an interrupted drain aborts nothing)."""
    stream = Stream(edge, key, max_tokens=LONG)
    stream.began = time.monotonic()
    stream.start()
    assert stream.decoding.wait(60), "the long answer never began"
    res = _interrupted_at(edge, [("draining", signal.SIGINT)], *args, stream=stream)
    stream.join(120)
    assert (stream.finish, stream.tokens, stream.model) == ("length", LONG, model), vars(stream)
    return res


def _in_process(edge: EdgeProject, room, where: str, patch, *args: str) -> cli.Result:
    """`composegen ARGS` in this process (never a subprocess, whatever COMPOSEGEN_TEST_SUBPROCESS
    says: the patch must count) with Python's own SIGINT handler, ROOM's WHERE replaced by PATCH."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with mock.patch.object(room, where, patch):
            return cli.run_inproc("--root", str(edge.root), *args)
    finally:
        signal.signal(signal.SIGINT, previous)


def _at_identity(edge: EdgeProject, *args: str) -> cli.Result:
    """Ctrl-C as the first identity step begins; the journal said "identity" then."""
    real, at = standby.identity, []

    def identity(r):
        if not at:
            at.append(json.loads(_journal(edge).read_text())["step"])
            signal.raise_signal(signal.SIGINT)
        real(r)

    res = _in_process(edge, standby, "identity", identity, *args)
    assert at == ["identity"], at
    return res


def _mid_sleep(edge: EdgeProject, *args: str) -> cli.Result:
    """Ctrl-C (from another thread, as a terminal's) 0.3 s into the first /sleep (1.5 s), asserted to
    have landed before the engine answered; the journal said "putting … to sleep" then."""
    real, at, landed = sleepmode._ok, [], []

    def ok(ctr, port, call):
        if not call.path.startswith("/sleep") or at:
            return real(ctr, port, call)
        at.append(json.loads(_journal(edge).read_text())["step"])
        timer = threading.Timer(
            0.3, lambda: (landed.append(1), os.kill(os.getpid(), signal.SIGINT))
        )
        timer.start()
        try:
            return real(ctr, port, call)
        finally:
            at.append(bool(landed))  # the signal came while the /sleep was in flight
            timer.cancel()

    res = _in_process(edge, sleepmode, "_ok", ok, *args)
    assert len(at) == 2 and at[0].startswith("putting") and at[1] is True, at
    return res


def _undone(edge: EdgeProject, res, code: int, serving: str) -> None:
    """The command undid itself: exit CODE, the alias said to be back on SERVING, no journal."""
    assert res.returncode == code, (res.returncode, res.stderr)
    assert f"ds4-flash points at {serving} again" in res.stderr, res.stderr
    assert not _journal(edge).exists(), res.stderr


def _serves(edge: EdgeProject, key: str, profile: str) -> None:
    """PROFILE serves the alias awake, no journal, its engine awake."""
    code, _, data = edge.request("POST", "/v1/chat/completions", key, CHAT, timeout=60)
    assert code == 200 and json.loads(data)["model"] == f"{profile}-served", (code, data)
    assert not _journal(edge).exists()
    sleeping = {s["profile"]: s["endpoint"]["sleeping"]
                for s in json.loads(edge.ok("status", "--json"))["stacks"]}  # fmt: skip
    assert sleeping[profile] is None, sleeping


def _recovered(edge: EdgeProject, key: str, res, serving: str) -> None:
    """A second Ctrl-C during the undo: the journal left (the alias 503, `edge recover` named), which
    `edge recover` undoes."""
    assert res.returncode == 130 and "edge recover" in res.stderr, (res.returncode, res.stderr)
    assert f"interrupted while bringing {serving} back" in res.stderr, res.stderr
    assert _journal(edge).exists()
    assert json.loads(edge.ok("edge", "status", "--json"))["aliases"][0]["interrupted"]
    code, headers, data = edge.request("POST", "/v1/chat/completions", key, CHAT)
    assert code == 503 and headers.get("Retry-After"), (code, data)
    assert "edge recover" in json.loads(data)["error"]["stage"], data
    recovered = json.loads(edge.ok("edge", "recover", "--json", timeout=600))
    assert recovered["action"].startswith("undone"), recovered


def test_ctrl_c_and_sigterm_at_every_step_leave_the_old_engine_awake_or_recoverable(edge):
    old, new = edge.old, edge.new
    old_model, new_model = f"{old}-served", f"{new}-served"
    decide(edge, "c1", new)
    key = edge.ok("edge", "keys", "add", "int").strip()
    promote = ("promote", new, "--alias", "ds4-flash", "--campaign", "c1", "--emulate")
    rollback = ("rollback", "ds4-flash", "--emulate")
    # a client polls the alias through TLS during every interrupted step and every `edge recover`
    with Poller(edge, key, pause_s=0.5) as poller:
        poller.wait_for(1)
        _undone(edge, _while_decoding(edge, key, old_model, *promote), 130, old)
        _serves(edge, key, old)
        _undone(edge, _mid_sleep(edge, *promote), 130, old)
        _serves(edge, key, old)
        for prefix, sig in (("waking", signal.SIGINT), ("warm-up", signal.SIGINT),
                            ("gates on", signal.SIGINT), ("waking", signal.SIGTERM)):  # fmt: skip
            res = _interrupted_at(edge, [(prefix, sig)], *promote)
            _undone(edge, res, 128 + sig, old)
            _serves(edge, key, old)
        _undone(edge, _at_identity(edge, *promote), 130, old)
        _serves(edge, key, old)
        # never the new model before a promote went through; never an untold answer
        assert not poller.untold(old_model), poller.untold(old_model)[:5]
        edge.ok(*promote, timeout=600)
        poller.wait_for(len(poller.seen) + 2)
        _undone(edge, _while_decoding(edge, key, new_model, *rollback), 130, new)
        _serves(edge, key, new)
        _undone(edge, _mid_sleep(edge, *rollback), 130, new)
        _serves(edge, key, new)
        # Ctrl-C at waking, and again as the undo wakes NEW: left to `edge recover`
        undoing = f"switching ds4-flash to {old} by sleep failed, restoring {new}: waking {new}"
        twice = [("waking", signal.SIGINT), (undoing, signal.SIGINT)]
        _recovered(edge, key, _interrupted_at(edge, twice, *rollback), new)
        _serves(edge, key, new)
        res = _interrupted_at(edge, [("gates on", signal.SIGINT)], *rollback)
        _undone(edge, res, 130, new)
        _serves(edge, key, new)
        _undone(edge, _at_identity(edge, *rollback), 130, new)
        _serves(edge, key, new)
        poller.wait_for(len(poller.seen) + 2)
    assert not poller.untold(old_model, new_model), poller.untold(old_model, new_model)[:5]
    # each interrupted step told (503), the engine put back serving after each
    assert phases(poller.seen) == [old_model, "503"] * 8 + [new_model, "503"] * 5 + [new_model]
