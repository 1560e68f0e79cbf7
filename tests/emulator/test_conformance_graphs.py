"""The emulator against the second real vLLM 0.26.0 recording (tests/data/real-0.26.0-h200-graphs: CUDA
graphs and torch.compile on, the hermes tool parser): every exchange of probes-hermes-graphs.json replayed
and compared as test_conformance.py compares the eager recording. Only the differences in docs/emulator.md's
table may remain: the emulated model calls tools where the random one wrote noise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.emulator.test_conformance import H200, _differences, _replay, check_recording
from tests.support.emulator_proc import EmulatorProc

GRAPHS = Path(__file__).resolve().parents[1] / "data" / "real-0.26.0-h200-graphs"
FLAGS = [  # the recording's flags (README there): no --enforce-eager
    "/tmp/model",
    "--served-model-name",
    "tiny",
    "--max-model-len",
    "4096",
    "--max-num-batched-tokens",
    "2048",
    "--max-num-seqs",
    "4",
    "--gpu-memory-utilization",
    "0.30",
    "--enable-auto-tool-choice",
    "--tool-call-parser",
    "hermes",
]


def _exchanges() -> list[dict]:
    return json.loads((GRAPHS / "probes-hermes-graphs.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    with EmulatorProc.start(
        tmp_path_factory.mktemp("graphs"), serve_args=FLAGS, served="tiny", env=H200
    ) as proc:
        yield proc


def test_every_exchange_of_the_graphs_recording_matches_or_is_a_listed_difference(emu):
    compared = [(e["name"], _differences(e, *_replay(emu, e))) for e in _exchanges()]
    assert check_recording("probes-hermes-graphs", compared) == 28


def test_a_tool_parser_stream_carries_the_last_token_with_its_finish_reason(emu):
    real = next(e for e in _exchanges() if e["name"] == "chat_stream_usage")
    status, _, body = _replay(emu, real)
    chunks = [json.loads(line[6:]) for line in body.split("\n") if line.startswith("data: {")]
    finish = next(c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"])
    assert status == 200 and finish["choices"][0]["delta"].get("content")  # not an empty `{}` delta


def _families(text: str) -> dict[str, list[str]]:
    """metric name -> its label-name sets, one per series (values are not compared)."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line.startswith("vllm:tool_call_parser"):
            name, _, rest = line.partition("{")
            labels = sorted(part.split("=")[0] for part in rest.split("}")[0].split(","))
            out.setdefault(name, []).append(",".join(labels))
    return out


def test_tool_parser_metric_family_is_vllms_and_counts_the_parsers_work(emu):
    real = next(e for e in _exchanges() if e["name"] == "metrics_after")["body"]
    before = _replay(
        emu, {"method": "GET", "path": "/metrics", "request": None, "auth_sent": False, "name": "m"}
    )
    # the same series: mode × outcome × request type, no engine
    assert _families(before[2]) == _families(real)
    chat = next(e for e in _exchanges() if e["name"] == "chat_stream_usage")
    streamed = _replay(emu, chat)[2]
    usage = next(
        json.loads(r[6:])["usage"]
        for r in streamed.split("\n")
        if r.startswith("data: {") and '"usage"' in r
    )
    after = _replay(
        emu, {"method": "GET", "path": "/metrics", "request": None, "auth_sent": False, "name": "m"}
    )[2]
    line = 'vllm:tool_call_parser_invocations_total{mode="streaming",model_name="tiny",outcome="no_tool_call",'
    counted = [float(row.rsplit(" ", 1)[1]) for row in (before[2], after) for row in row.splitlines()
               if row.startswith(line + 'request_type="chat_completions"}')]  # fmt: skip
    assert counted[1] - counted[0] == usage["completion_tokens"] > 0  # once per streamed delta


def test_ignore_eos_generates_every_asked_token():
    from composegen.emulator.chat import ServingInfo, plan_chat

    info = ServingInfo(model="m", served_names=["m"], max_model_len=4096)
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 64}
    short, full = plan_chat(body, info), plan_chat({**body, "ignore_eos": True}, info)
    assert short.completion_tokens < 64 and short.finish_reason == "stop"
    assert full.completion_tokens == 64 and full.finish_reason == "length"
