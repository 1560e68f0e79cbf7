"""The emulator against the two other real vLLM 0.26.0 recordings of exchanges: the `--api-key` route matrix
(tests/data/real-0.26.0-h200-apikey-routes/exposure-matrix.json: every route vLLM lists, with and without
the key; status, content type and top-level keys compared) and the sleep-mode steps of
tests/data/real-0.26.0-h200-sleep/sleep.json (each step's status, the answers equal across cycles, an
in-flight request's finish under mode=wait and mode=abort). Refusals count as answers; only the rows of
docs/emulator.md's table may differ (check_recording)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import httpx

from tests.emulator.test_conformance import H200, check_recording
from tests.emulator.test_sleep import SLEEP, sleeper
from tests.support.emulator_proc import RECORDED_FLAGS, EmulatorProc

DATA = Path(__file__).resolve().parents[1] / "data"
ROUTES_FLAGS = [  # the matrix's server (its README): two served names, a key, the hermes parser
    *RECORDED_FLAGS,
    "--served-model-name",
    "tiny",
    "ds4-flash",
    "--api-key",
    "sk-test",
    "--enable-auto-tool-choice",
    "--tool-call-parser",
    "hermes",
]


def _row_differences(emu: EmulatorProc, row: dict) -> list[str]:
    headers = {"authorization": "Bearer sk-test"} if row["auth"] else {}
    body = row["request_body"]
    res = httpx.request(
        row["method"],
        emu.base_url + row["request_path"],
        json=body,
        headers=headers,
        timeout=30,
    )
    out = (
        [] if res.status_code == row["status"] else [f"status {row['status']} vs {res.status_code}"]
    )
    if res.headers.get("content-type") != row["content_type"]:
        out.append(f"content-type {row['content_type']!r} vs {res.headers.get('content-type')!r}")
    if row["json_keys"] is not None and not out:
        keys = sorted(res.json()) if isinstance(res.json(), dict) else None
        out += [] if keys == row["json_keys"] else [f"keys {row['json_keys']} vs {keys}"]
    return out


def test_every_route_of_the_api_key_matrix_answers_as_recorded_or_is_a_listed_difference(tmp_path):
    matrix = json.loads((DATA / "real-0.26.0-h200-apikey-routes/exposure-matrix.json").read_text())
    with EmulatorProc.start(tmp_path, serve_args=ROUTES_FLAGS, served="tiny", env=H200) as emu:
        compared = [
            (
                f"{r['method']} {r['path']} {'key' if r['auth'] else 'no key'}",
                _row_differences(emu, r),
            )
            for r in matrix
        ]
    assert len(compared) == 68 and check_recording("exposure-matrix", compared) == 36


def _step(name: str, recorded: object, emulated: object) -> tuple[str, list[str]]:
    return name, [] if recorded == emulated else [f"{recorded!r} vs {emulated!r}"]


def _ask(emu) -> tuple[int, str]:
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "count the waves of the sea"}],
        "max_tokens": 32,
        "temperature": 0,
        "ignore_eos": True,
    }
    res = httpx.post(f"{emu.url}/v1/chat/completions", json=body, timeout=30)
    return res.status_code, res.json()["choices"][0]["message"]["content"]


def _post(emu, path: str, body: dict | None = None) -> int:
    return httpx.post(f"{emu.url}{path}", json=body or {}, timeout=60).status_code


def _in_flight(emu, mode: str) -> tuple[int, str | None, int]:
    """A 1,500-token stream put to sleep with MODE: (its status, finish reason, tokens)."""
    got: dict = {"tokens": 0, "finish": None}

    def read() -> None:
        body = {
            "model": "m",
            "messages": [{"role": "user", "content": "a long answer"}],
            "stream": True,
            "max_tokens": 1500,
            "ignore_eos": True,
        }
        with httpx.stream("POST", f"{emu.url}/v1/chat/completions", json=body, timeout=60) as res:
            got["status"] = res.status_code
            for line in res.iter_lines():
                for choice in json.loads(line[6:])["choices"] if line.startswith("data: {") else []:
                    got["tokens"] += bool(choice["delta"].get("content"))
                    got["finish"] = choice.get("finish_reason") or got["finish"]

    thread = threading.Thread(target=read)
    thread.start()
    time.sleep(0.3)
    _post(emu, f"/sleep?level=1&mode={mode}")
    thread.join(60)
    _post(emu, "/wake_up")
    return got["status"], got["finish"], got["tokens"]


def test_the_sleep_steps_answer_as_recorded_or_are_listed_differences(start):
    recorded = json.loads((DATA / "real-0.26.0-h200-sleep/sleep.json").read_text())
    emu = sleeper(start, *SLEEP, VLLM_SERVER_DEV_MODE="1", EMU_DECODE_TOK_S="1000")
    first, compared = _ask(emu)[1], []
    for row in recorded["l1"]:
        name = f"l1.{row['cycle']}"
        compared.append(_step(f"{name}.sleep", row["sleep_status"], _post(emu, "/sleep?level=1")))
        asleep = httpx.get(f"{emu.url}/is_sleeping", timeout=10).json()["is_sleeping"]
        compared.append(_step(f"{name}.is_sleeping", row["sleeping"][row["sleep"]], asleep))
        compared.append(_step(f"{name}.wake", row["wake_status"], _post(emu, "/wake_up")))
        status, answer = _ask(emu)
        compared += [
            _step(f"{name}.request", row["request_status"], status),
            _step(f"{name}.same_answer", row["same_answer"], answer == first),
        ]
    for row in recorded["l2"]:
        name = f"l2.{row['cycle']}"
        compared.append(_step(f"{name}.sleep", row["sleep_status"], _post(emu, "/sleep?level=2")))
        for step, path, body in (
            ("wake_weights", "/wake_up?tags=weights", None),
            ("reload_weights", "/collective_rpc", {"method": "reload_weights"}),
            ("wake_kv", "/wake_up?tags=kv_cache", None),
        ):
            compared.append(_step(f"{name}.{step}", row[step][0], _post(emu, path, body)))
        status, answer = _ask(emu)
        compared += [
            _step(f"{name}.request", row["request_status"], status),
            _step(f"{name}.same_answer", row["same_answer"], answer == first),
        ]
    for mode, row in recorded["inflight"].items():
        status, finish, tokens = _in_flight(emu, mode)
        compared += [
            _step(f"inflight.{mode}.status", row["status"], status),
            _step(f"inflight.{mode}.finish", row["finish"], finish),
            _step(f"inflight.{mode}.whole", row["tokens"] == 1500, tokens == 1500),
        ]
    assert len(compared) == 10 * 5 + 3 * 6 + 2 * 3
    assert check_recording("sleep", compared) == len(compared)
