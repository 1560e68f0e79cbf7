"""The emulator is never kinder than the engine (issue 48): a model POST without `Content-Type:
application/json` is refused 400 as vLLM's `validate_json_request` refuses it (a real 0.26.0 answered the
standby switch's warm-up so), a refused request's body is read so a kept-alive connection serves the next
one, a chat request to a sleeping engine gets no answer (the real one gave none within 8 s) until the wake,
the `… GiB memory is still in use` line is the whole GPU's (1.74 GiB recorded with the other engine asleep
beside it), and a client that hangs up on a non-streamed request ends its generation."""

from __future__ import annotations

import http.client
import json
import re
import socket
import threading
import time
from types import SimpleNamespace

import httpx

from composegen.evidence import sleepcycles
from composegen.wire.http import Peer
from tests.emulator.test_gpu_ledger import _engine
from tests.emulator.test_sleep import CHAT, RECORDED, SLEEP, _post, sleeper

BODY = json.dumps(CHAT).encode()


def _raw(emu, method: str, path: str, body: bytes | None, headers: dict[str, str]):
    conn = http.client.HTTPConnection("127.0.0.1", emu.port, timeout=10)
    conn.request(method, path, body=body, headers=headers)
    resp = conn.getresponse()
    return conn, resp.status, resp.read()


def test_a_model_post_without_json_content_type_is_refused_as_vllm_refuses_it(start):
    emu = sleeper(start)
    for headers in ({}, {"content-type": "text/plain"}):
        conn, status, body = _raw(emu, "POST", "/v1/chat/completions", BODY, headers)
        error = json.loads(body)["error"]
        assert (status, error["type"], error["param"], error["code"]) == (
            400,
            "Bad Request",
            None,
            400,
        )
        assert "Unsupported Media Type: Only 'application/json' is allowed" in error["message"]
        # the same connection goes on: the refused body was read
        conn.request("GET", "/v1/models")
        assert conn.getresponse().status == 200
    typed = {"content-type": "application/json; charset=utf-8"}
    assert _raw(emu, "POST", "/v1/chat/completions", BODY, typed)[1] == 200
    # FastAPI parses the body before the check runs: bad JSON is a JSON error even without the header
    bad = json.loads(_raw(emu, "POST", "/tokenize", b"{not json", {})[2])["error"]
    assert bad["param"] == "body.1"
    assert _raw(emu, "POST", "/ping", b"{}", {})[1] == 200  # no check on /ping


def test_composegen_states_the_content_type_of_every_body_it_sends(start, monkeypatch):
    emu = sleeper(start)
    peer = Peer("127.0.0.1", emu.port)
    assert peer.fetch("POST", "/v1/chat/completions", BODY, deadline_s=30).status == 200
    # the standby switch's warm-up and qualify's probe (a real 0.26.0 answered it 400)
    monkeypatch.setattr(sleepcycles.driver, "endpoint", lambda r: SimpleNamespace(peer=peer))
    served = SimpleNamespace(profile=SimpleNamespace(model=SimpleNamespace(served_name="m")))
    assert sleepcycles.probe(served)  # type: ignore[arg-type]


def test_a_refused_request_leaves_a_kept_alive_connection_usable(start):
    emu = sleeper(start, "--api-key", "k")
    conn = http.client.HTTPConnection("127.0.0.1", emu.port, timeout=10)
    for path in ("/v1/chat/completions", "/nowhere", "/v1/models"):  # 401, 404, 405 with a body
        conn.request("POST", path, body=BODY, headers={"content-type": "application/json"})
        resp = conn.getresponse()
        assert (
            resp.status in (401, 404, 405) and resp.getheader("content-type") == "application/json"
        )
        resp.read()


def test_a_chat_request_to_a_sleeping_engine_waits_for_the_wake(start):
    emu = sleeper(start, *SLEEP, VLLM_SERVER_DEV_MODE="1")
    assert _post(emu, "/sleep?level=1").status_code == 200
    answers: list[httpx.Response] = []
    waiting = threading.Thread(
        target=lambda: answers.append(
            httpx.post(f"{emu.url}/v1/chat/completions", json=CHAT, timeout=60)
        )
    )
    waiting.start()
    waiting.join(2)  # the real engine gave no answer within 8 s
    assert answers == [] and waiting.is_alive()
    try:
        httpx.post(f"{emu.url}/v1/completions", json={**CHAT, "prompt": "x"}, timeout=1)
        raise AssertionError("a sleeping engine answered")
    except httpx.ReadTimeout:
        pass
    assert _post(emu, "/wake_up").status_code == 200
    waiting.join(30)
    assert [a.status_code for a in answers] == [200]


def test_the_still_in_use_line_is_the_whole_gpus(start, tmp_path):
    ledger = tmp_path / "gpus"
    ledger.mkdir()
    a = _engine(start, ledger, "a")
    assert _post(a, "/sleep?level=1").status_code == 200
    b = _engine(start, ledger, "b")
    assert _post(b, "/sleep?level=1").status_code == 200
    pattern = r"Sleep mode freed [\d.]+ GiB memory, ([\d.]+) GiB memory is still in use"
    assert re.findall(pattern, a.log) == ["0.87"]  # alone on the GPU, as A's first sleep recorded
    assert re.findall(pattern, b.log) == ["1.74"]  # beside the sleeping A, as recorded
    assert "1.74 GiB memory is still in use" in (RECORDED / "serve-b.log").read_text()


def _aborted(emu) -> tuple[float, float]:
    text = httpx.get(f"{emu.url}/metrics", timeout=10).text
    abort = re.search(
        r'vllm:request_success_total\{[^}]*finished_reason="abort"[^}]*\} ([\d.]+)', text
    )
    tokens = re.search(r"vllm:generation_tokens_total\{[^}]*\} ([\d.]+)", text)
    return float(abort[1]) if abort else 0.0, float(tokens[1]) if tokens else 0.0


def test_a_hang_up_ends_a_non_streamed_generation(start):
    emu = sleeper(start, EMU_DECODE_TOK_S="100", EMU_DECODE_SLEEP_CAP_S="60")
    for path, extra in (("/v1/chat/completions", {}), ("/v1/completions", {"prompt": "x"})):
        before = _aborted(emu)
        body = json.dumps({**CHAT, **extra, "max_tokens": 3000, "ignore_eos": True}).encode()
        with socket.create_connection(("127.0.0.1", emu.port)) as sock:
            head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            sock.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
            time.sleep(0.5)
        deadline = time.monotonic() + 10
        while _aborted(emu)[0] == before[0]:
            assert time.monotonic() < deadline, "the generation went on after the hang-up"
            time.sleep(0.1)
        assert _aborted(emu)[1] - before[1] < 3000, path
