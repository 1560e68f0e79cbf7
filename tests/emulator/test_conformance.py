"""The emulator against a real vLLM 0.26.0 server: every HTTP exchange recorded in
tests/data/real-0.26.0-h200/probes-*.json is replayed against the emulator started with the recorded flags
(EMU_VLLM_VERSION=0.26.0, the recording's H200 and tiny model as memory inputs). Compared per exchange:
status, content type, the `server`, `vary` and `transfer-encoding` headers, the JSON key sets recursively (a
null on one side is a value, not a shape), error type and param, and for streams the event order and each
chunk's keys.
The intentional differences are the rows of docs/emulator.md's one table (intentional()); every other
exchange matches.
"""

from __future__ import annotations

import fnmatch
import http.client
import json
import re
from pathlib import Path

import pytest

from composegen.emulator.memory import MemoryInputs, plan_memory
from tests.support.emulator_proc import RECORDED_FLAGS, EmulatorProc

REAL = Path(__file__).resolve().parents[1] / "data" / "real-0.26.0-h200"
FP8 = [
    "--kv-cache-dtype",
    "fp8",
    "--enable-auto-tool-choice",
    "--tool-call-parser",
    "hermes",
    "--api-key",
    "sk-test",
]
H200 = {  # the recording's GPU and model as the emulator's memory inputs (README facts)
    "EMU_VLLM_VERSION": "0.26.0",
    "EMU_GPU_GIB": "139.8",
    "EMU_FREE_GIB": "139.29",
    "EMU_WEIGHTS_GIB": "0.01",
    "EMU_ACT_BASE_GIB": "0.04",
    "EMU_ACT_GIB_PER_BATCH_TOKEN": "0",
    "EMU_NON_TORCH_GIB": "0.22",
    "EMU_KV_BYTES_PER_TOKEN": "2048",
    "EMU_PREFILL_TOK_S": "0",
    "EMU_DECODE_TOK_S": "0",
}
DOC = Path(__file__).resolve().parents[2] / "docs" / "emulator.md"


def intentional() -> list[tuple[set[str], list[str], str]]:
    """docs/emulator.md's one table of the differences kept on purpose: (recordings, exchange name
    patterns, why), read from the page so they are documented once."""
    rows, table = [], DOC.read_text(encoding="utf-8").split("### Intentional differences", 1)[1]
    for line in table.strip().splitlines()[2:]:
        if not line.startswith("|"):
            break
        recordings, names, why = (cell.strip() for cell in line.strip().strip("|").split("|"))
        rows.append(
            (set(re.findall(r"`([^`]+)`", recordings)), re.findall(r"`([^`]+)`", names), why)
        )
    return rows


def why_different(recording: str, name: str) -> str | None:
    for recordings, patterns, why in intentional():
        if recording in recordings and any(fnmatch.fnmatchcase(name, p) for p in patterns):
            return why
    return None


def check_recording(recording: str, compared: list[tuple[str, list[str]]]) -> int:
    """Fails on a difference the table does not list, and on a row that lists no difference any
    more (a listed difference that vanished must leave the table); the number matched."""
    unexpected = {
        name: found for name, found in compared if found and not why_different(recording, name)
    }
    assert unexpected == {}
    for recordings, names, why in intentional():
        for pattern in names if recording in recordings and not why.startswith("/metrics") else []:
            hits = [found for name, found in compared if fnmatch.fnmatchcase(name, pattern)]
            assert any(hits), (
                f"docs/emulator.md lists {recording} {pattern}: no such difference now"
            )
    return sum(not found for _, found in compared)


def _exchanges(recording: str) -> list[dict]:
    return json.loads((REAL / f"probes-{recording}.json").read_text(encoding="utf-8"))


def _shape_diff(real, emu, path: str = "$") -> list[str]:
    """Key-set differences, recursively; values (text, numbers, ids) are not compared; null is a value."""
    if real is None or emu is None:
        return []
    if isinstance(real, dict) and isinstance(emu, dict):
        out = (
            [
                f"{path}: keys only in vLLM {sorted(set(real) - set(emu))}, only in the emulator "
                f"{sorted(set(emu) - set(real))}"
            ]
            if set(real) != set(emu)
            else []
        )
        for key in set(real) & set(emu):
            out += _shape_diff(real[key], emu[key], f"{path}.{key}")
        return out
    if isinstance(real, list) and isinstance(emu, list):
        return _shape_diff(real[0], emu[0], f"{path}[0]") if real and emu else []
    if isinstance(real, (dict, list)) != isinstance(emu, (dict, list)):
        return [f"{path}: {type(real).__name__} in vLLM, {type(emu).__name__} in the emulator"]
    return []


def _events(body: str) -> list[tuple[str | None, object]]:
    events = []
    for block in body.split("\n\n"):
        if not block.strip():
            continue
        fields = dict(line.split(": ", 1) for line in block.split("\n") if ": " in line)
        data = fields.get("data", "")
        events.append((fields.get("event"), data if data == "[DONE]" else json.loads(data)))
    return events


def _chunk_kind(data: object) -> str:
    """A chat chunk's role in the stream, so that shapes are compared kind by kind."""
    if not isinstance(data, dict):
        return str(data)
    if "usage" in data:
        return "usage"
    choice = (data.get("choices") or [{}])[0]
    if choice.get("delta", {}).get("role"):
        return "role"
    if choice.get("finish_reason"):
        return "finish+" + ",".join(sorted(choice["delta"]))
    return "token"


def _stream_diff(real_body: str, emu_body: str) -> list[str]:
    real, emu = _events(real_body), _events(emu_body)
    named = any(event for event, _ in real)
    key = (lambda e: e[0]) if named else (lambda e: _chunk_kind(e[1]))

    def order(events: list) -> list:
        return [k for i, k in enumerate(map(key, events)) if i == 0 or k != key(events[i - 1])]

    out = (
        []
        if order(real) == order(emu)
        else [f"stream order: vLLM {order(real)}, emulator {order(emu)}"]
    )
    firsts = {}
    for event in emu:
        firsts.setdefault(key(event), event[1])
    for event in real:
        if key(event) in firsts:
            out += _shape_diff(event[1], firsts[key(event)], f"[{key(event)}]")
    return sorted(set(out))


def _replay(emu: EmulatorProc, exchange: dict) -> tuple[int, dict[str, str], str]:
    body, headers = exchange["request"], {}
    if body is not None:
        body = body if isinstance(body, str) else json.dumps(body)
        headers["content-type"] = "application/json"
    if exchange["auth_sent"] or exchange["name"].endswith("badkey"):
        headers["authorization"] = "Bearer " + ("sk-test" if exchange["auth_sent"] else "wrong-key")
    conn = http.client.HTTPConnection("127.0.0.1", emu.port, timeout=30)
    try:
        conn.request(exchange["method"], exchange["path"], body=body, headers=headers)
        resp = conn.getresponse()
        return (
            resp.status,
            {k.lower(): v for k, v in resp.getheaders()},
            resp.read().decode("utf-8", "replace"),
        )
    finally:
        conn.close()


def _differences(exchange: dict, status: int, headers: dict[str, str], body: str) -> list[str]:
    real_headers = {k.lower(): v for k, v in exchange["headers"]}
    out = [] if status == exchange["status"] else [f"status {exchange['status']} vs {status}"]
    for name in ("content-type", "server", "transfer-encoding", "vary"):
        if real_headers.get(name) != headers.get(name):
            out.append(f"{name}: {real_headers.get(name)!r} vs {headers.get(name)!r}")
    if (real_headers.get("content-type") or "").startswith("text/event-stream"):
        return out + _stream_diff(exchange["body"], body)
    if real_headers.get("content-type") == "application/json":
        real, emu = json.loads(exchange["body"]), json.loads(body)
        out += _shape_diff(real, emu)
        real_error, emu_error = real.get("error"), emu.get("error")
        if isinstance(real_error, dict) and isinstance(emu_error, dict):
            for field in ("type", "param"):
                if real_error.get(field) != emu_error.get(field):
                    out.append(
                        f"error {field}: {real_error.get(field)!r} vs {emu_error.get(field)!r}"
                    )
    elif exchange["body"] != body:
        out.append(f"body {exchange['body'][:60]!r} vs {body[:60]!r}")
    return out


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("conformance")
    with (
        EmulatorProc.start(tmp, serve_args=RECORDED_FLAGS, served="tiny", env=H200) as bf16,
        EmulatorProc.start(tmp, serve_args=RECORDED_FLAGS + FP8, served="tiny", env=H200) as fp8,
    ):
        yield {"bf16": bf16, "fp8-hermes-apikey": fp8}


@pytest.mark.parametrize(("recording", "matching"), [("bf16", 30), ("fp8-hermes-apikey", 9)])
def test_every_recorded_exchange_matches_or_is_a_listed_difference(servers, recording, matching):
    compared = [
        (e["name"], _differences(e, *_replay(servers[recording], e))) for e in _exchanges(recording)
    ]
    assert check_recording(f"probes-{recording}", compared) == matching


def test_the_shape_comparison_catches_what_it_should():
    assert _shape_diff({"a": 1, "b": {"c": 1}}, {"a": 2, "b": {"c": "x"}}) == []
    assert _shape_diff({"a": 1}, {"a": 1, "tool_calls": []}) != []
    assert _shape_diff({"x": {"reason": "length"}}, {"x": None}) == []
    assert _shape_diff({"u": {"p": 1, "d": None}}, {"u": {"p": 1}}) != []
    real = (
        'data: {"choices":[{"delta":{"content":"a"},"finish_reason":"length"}]}\n\ndata: [DONE]\n\n'
    )
    separate = (
        'data: {"choices":[{"delta":{"content":"a"},"finish_reason":null}]}\n\n'
        'data: {"choices":[{"delta":{},"finish_reason":"length"}]}\n\ndata: [DONE]\n\n'
    )
    assert _stream_diff(real, separate) != [] and _stream_diff(real, real) == []


def test_fp8_kv_cache_holds_twice_the_tokens_as_recorded():
    real_bf16, real_fp8 = 21_847_200, 43_661_648  # same KV memory (41.67 / 41.64 GiB)
    inputs = MemoryInputs.from_env(H200)
    values = {"gpu_memory_utilization": 0.3, "max_model_len": 4096, "max_num_batched_tokens": 2048}
    bf16 = plan_memory(values, inputs)
    fp8 = plan_memory({**values, "kv_cache_dtype": "fp8"}, inputs)
    assert fp8.kv_gib == bf16.kv_gib and abs(fp8.kv_tokens - 2 * bf16.kv_tokens) <= 1
    assert bf16.kv_tokens == pytest.approx(real_bf16, rel=0.001) and fp8.kv_tokens == pytest.approx(
        real_fp8, rel=0.001
    )
    assert plan_memory({**values, "kv_cache_dtype": "auto"}, inputs).kv_tokens == bf16.kv_tokens


def test_the_imitated_version_shows_in_the_startup_log(servers):
    from composegen.vllm.startup import parse_startup_log

    report = parse_startup_log(servers["fp8-hermes-apikey"].log_text())
    assert report.vllm_version == "0.26.0+composegen-emulator" and report.ready
    assert report.kv_cache_tokens == pytest.approx(43_661_648, rel=0.001)
    assert report.effective_args is not None and report.effective_args["kv_cache_dtype"] == "fp8"
    lines = servers["bf16"].log_text().splitlines()
    size = next(i for i, line in enumerate(lines) if "GPU KV cache size:" in line)
    assert (
        lines[size].endswith(" tokens")
        and "Maximum concurrency for 4,096 tokens" in lines[size + 1]
    )


def test_eager_start_shm_and_shutdown_look_like_the_recording(tmp_path):
    emu = EmulatorProc.start(tmp_path, serve_args=RECORDED_FLAGS, served="tiny", env=H200)
    shm = tmp_path / f"shm-{emu.port}"
    held = sorted((p.name, p.stat().st_size) for p in shm.iterdir())
    emu.stop()
    log = emu.log_text()
    # TP 1: one semaphore
    assert [size for _, size in held] == [32] and held[0][0].startswith("sem.loky-")
    assert list(shm.iterdir()) == []  # removed at shutdown, as vLLM's is
    assert "Graph capturing" not in log and "torch.compile" not in log  # --enforce-eager
    assert (
        "[shutdown] API server: shutdown triggered" in log
        and "Application shutdown complete." in log
    )
    assert "Finished server process" not in log
    real = (REAL / "serve-bf16-eager.log").read_text(encoding="utf-8")
    assert ("Graph capturing" in real, "Finished server process" in real) == (False, False)
