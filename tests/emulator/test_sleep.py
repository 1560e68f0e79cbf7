"""The emulator's sleep mode against the H200 recording (../shared/real-vllm/0.26.0-h200-sleep/, copied
into tests/data/real-0.26.0-h200-sleep/): the routes exist only with VLLM_SERVER_DEV_MODE=1 and
--enable-sleep-mode, the log lines have the recorded shape, level 1 and level 2 wake as recorded, wait and
abort treat a running request as recorded, answers are equal across cycles, and the faults show."""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.support.helpers import REPO

RECORDED = REPO / "tests/data/real-0.26.0-h200-sleep"
SLEEP = ("--enable-sleep-mode", "--gpu-memory-utilization", "0.6")
CHAT = {
    "model": "m",
    "messages": [{"role": "user", "content": "Say hi"}],
    "max_tokens": 8,
    "temperature": 0,
}


def _recorded_shapes(log: Path) -> set[str]:
    """The sleep/wake lines of a recorded log with their numbers and pids blanked."""
    found = set()
    for line in log.read_text().splitlines():
        if re.search(r"sleep|wake|Reloading|cumem allocator", line) and not re.search(
            r"HTTP/1.1|non-default", line
        ):
            found.add(_shape(line))
    return found


def _shape(line: str) -> str:
    """Pids, times, figures and source line numbers blanked; the engine process named as 0.26 names it."""
    line = re.sub(r"\((EngineCore)_DP0 pid=\d+\)", r"(\1 pid=N)", line)
    line = re.sub(r"pid=\d+", "pid=N", line)
    line = re.sub(r"\[(\w+\.py):\d+\]", r"[\1]", line)
    line = re.sub(r"\d{2}-\d{2} \d{2}:\d{2}:\d{2}", "T", line)
    line = re.sub(r"\d+\.\d+", "X", line)
    return re.sub(r"\{'(weights|kv_cache)', '(weights|kv_cache)'\}", "{TAGS}", line)


def sleeper(start, *args: str, **env: str):
    """An emulated engine of a 6.5 GiB model at 0.6 of the GPU (the recording's big-model run)."""
    return start(
        "org/m",
        "--served-model-name",
        "m",
        "--max-model-len",
        "4096",
        *args,
        **{"EMU_WEIGHTS_GIB": "6.5", **env},
    )


def _post(emu, path: str, body: dict | None = None) -> httpx.Response:
    return httpx.post(f"{emu.url}{path}", json=body or {}, timeout=60)


def _asleep(emu) -> bool:
    return httpx.get(f"{emu.url}/is_sleeping", timeout=10).json()["is_sleeping"]


def test_without_dev_mode_or_sleep_mode_the_routes_are_404(start):
    for args, env in ((SLEEP, {}), ((), {"VLLM_SERVER_DEV_MODE": "1"})):
        emu = sleeper(start, *args, **env)
        routes = (
            ("POST", "/sleep"),
            ("POST", "/wake_up"),
            ("GET", "/is_sleeping"),
            ("POST", "/collective_rpc"),
            ("POST", "/reset_prefix_cache"),
        )
        for method, path in routes:
            res = httpx.request(method, f"{emu.url}{path}", timeout=10)
            assert res.status_code == 404 and res.json() == {"detail": "Not Found"}, (args, path)
        assert "Route: /sleep" not in emu.log


def test_dev_mode_lists_and_answers_the_cache_resets_as_recorded(start):
    # the exposure gate tries every route the engine's log lists: these must be in it, as in 0.26.0's
    emu = sleeper(start, *SLEEP, VLLM_SERVER_DEV_MODE="1")
    recorded = (RECORDED / "serve-a.log").read_text()
    for path in ("/reset_prefix_cache", "/reset_mm_cache", "/reset_encoder_cache"):
        line = f"Route: {path}, Methods: POST"
        assert line in recorded and line in emu.log, path
        res = _post(emu, path)
        assert res.status_code == 200 and res.content == b"", path


def test_level_1_and_level_2_cycles_log_and_answer_as_recorded(start):
    emu = sleeper(start, *SLEEP, VLLM_SERVER_DEV_MODE="1")
    assert "Enabling cumem allocator because sleep mode requires it." in emu.log
    assert (
        "Route: /sleep, Methods: POST" in emu.log and "Route: /is_sleeping, Methods: GET" in emu.log
    )
    first = httpx.post(f"{emu.url}/v1/chat/completions", json=CHAT, timeout=30).json()["choices"][
        0
    ]["message"]
    for _ in range(3):
        started = time.monotonic()
        res = _post(emu, "/sleep?level=1")
        assert res.status_code == 200 and res.content == b"" and _asleep(emu)
        assert _post(emu, "/wake_up").status_code == 200 and not _asleep(emu)
        assert time.monotonic() - started < 5
        again = httpx.post(f"{emu.url}/v1/chat/completions", json=CHAT, timeout=30).json()[
            "choices"
        ][0]["message"]
        assert again == first  # temperature 0: the same answer after every wake
    assert _post(emu, "/sleep?level=2").status_code == 200
    # the KV cache still sleeps
    assert _post(emu, "/wake_up?tags=weights").status_code == 200 and _asleep(emu)
    assert _post(emu, "/collective_rpc", {"method": "reload_weights"}).json() == {"results": [None]}
    assert _post(emu, "/wake_up?tags=kv_cache").status_code == 200 and not _asleep(emu)
    emu.wait_for("to wake up tags ['kv_cache'].")
    ours = {_shape(line) for line in emu.lines}
    missing = {
        s for s in _recorded_shapes(RECORDED / "serve-b.log") if "Loading safetensors" not in s
    } - ours
    missing -= {
        s
        for s in missing
        if "RotaryEmbedding" in s or "Filesystem type" in s or "Waiting for in-flight" in s
    }
    assert not missing, "\n".join(sorted(missing))
    # level 1 keeps the weights on the host
    assert "of which 6.50 GiB is backed up in CPU" in emu.log
    assert "0.87 GiB memory is still in use." in emu.log


@pytest.mark.parametrize(("mode", "finish"), [("wait", "length"), ("abort", "abort")])
def test_a_running_request_finishes_or_is_aborted_with_http_200(start, mode, finish):
    emu = sleeper(start, *SLEEP, VLLM_SERVER_DEV_MODE="1", EMU_DECODE_TOK_S="200")
    body = {**CHAT, "max_tokens": 300, "ignore_eos": True}
    answers: list[httpx.Response] = []
    thread = threading.Thread(
        target=lambda: answers.append(
            httpx.post(f"{emu.url}/v1/chat/completions", json=body, timeout=60)
        )
    )
    thread.start()
    time.sleep(0.4)
    started = time.monotonic()
    assert _post(emu, f"/sleep?level=1&mode={mode}").status_code == 200
    slept = time.monotonic() - started
    thread.join(30)
    (answer,) = answers
    assert answer.status_code == 200
    doc = answer.json()
    assert doc["choices"][0]["finish_reason"] == finish
    if mode == "wait":
        assert doc["usage"]["completion_tokens"] == 300 and slept > 0.5
        assert "Waiting for in-flight requests to complete before sleeping..." in emu.log
    else:
        assert doc["usage"]["completion_tokens"] < 300 and slept < 1.0


def test_a_stream_running_at_an_abort_ends_with_finish_reason_abort(start):
    emu = sleeper(start, *SLEEP, VLLM_SERVER_DEV_MODE="1", EMU_DECODE_TOK_S="100")
    events: list[dict] = []

    def read() -> None:
        body = {**CHAT, "max_tokens": 300, "ignore_eos": True, "stream": True}
        with httpx.stream("POST", f"{emu.url}/v1/chat/completions", json=body, timeout=60) as res:
            for line in res.iter_lines():
                if line.startswith("data: {"):
                    events.append(json.loads(line[6:]))

    thread = threading.Thread(target=read)
    thread.start()
    time.sleep(0.4)
    assert _post(emu, "/sleep?level=1&mode=abort").status_code == 200
    thread.join(30)
    finishes = [
        c["finish_reason"] for e in events for c in e.get("choices", []) if c.get("finish_reason")
    ]
    assert finishes == ["abort"] and len(events) < 300


def test_the_faults_grow_the_residue_and_fail_a_wake(start):
    grows = sleeper(start, *SLEEP, VLLM_SERVER_DEV_MODE="1", EMU_FAULT="sleep_residue_growth")
    for _ in range(3):
        _post(grows, "/sleep?level=1")
        _post(grows, "/wake_up")
    residues = [
        float(x) for x in re.findall(r"GiB memory, ([\d.]+) GiB memory is still in use", grows.log)
    ]
    assert residues == [0.87, 1.37, 1.87]
    fails = sleeper(start, *SLEEP, VLLM_SERVER_DEV_MODE="1", EMU_FAULT="wake_fails")
    _post(fails, "/sleep?level=1")
    assert _post(fails, "/wake_up").status_code == 200
    _post(fails, "/sleep?level=1")
    res = _post(fails, "/wake_up")
    assert res.status_code == 500 and _asleep(fails)
