"""The emulator's /metrics against the /metrics a real vLLM 0.26.0 served (tests/data/real-0.26.0-h200), and
its values under a concurrent load. Everything is parsed with prometheus_client's parser."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import DATA
from tests.support.emulator_proc import RECORDED_FLAGS, EmulatorProc

RECORDED = DATA / "real-0.26.0-h200" / "probes-bf16.json"
# A memory model that fits the tiny model, for the recorded server's flags.
TINY_ENV = {"EMU_WEIGHTS_GIB": "0.01", "EMU_GPU_GIB": "139.8", "EMU_ACT_BASE_GIB": "0.04"}


def recorded_exchange(name: str) -> dict:
    return next(e for e in json.loads(RECORDED.read_text()) if e["name"] == name)


def shape(text: str) -> dict[str, tuple[str, frozenset]]:
    """family name -> (type, the label names its samples carry)."""
    return {
        f.name: (f.type, frozenset((s.name, tuple(sorted(s.labels))) for s in f.samples))
        for f in text_string_to_metric_families(text)
    }


def samples(text: str) -> dict[tuple[str, tuple], float]:
    return {
        (
            s.name,
            tuple(sorted((k, v) for k, v in s.labels.items() if k not in ("engine", "model_name"))),
        ): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }


def value(text: str, name: str, **labels: str) -> float:
    return samples(text)[(name, tuple(sorted(labels.items())))]


def chat(url: str, max_tokens: int = 16, model: str = "tiny") -> dict:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "hello there"}],
        "max_tokens": max_tokens,
    }
    return httpx.post(f"{url}/v1/chat/completions", json=body, timeout=60).json()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    with EmulatorProc.start(
        tmp_path_factory.mktemp("tiny"), serve_args=RECORDED_FLAGS, env=TINY_ENV
    ) as emu:
        yield emu


def test_same_families_labels_and_content_type_as_the_recording(tiny):
    recorded = recorded_exchange("metrics_after")
    chat(tiny.base_url)  # the recording was taken after requests, too, some of them refused
    assert httpx.get(f"{tiny.base_url}/nowhere").status_code == 404
    resp = httpx.get(f"{tiny.base_url}/metrics")
    assert resp.headers["content-type"] == dict(recorded["headers"])["content-type"]
    ours, real = shape(resp.text), shape(recorded["body"])
    assert len(real) == 86 and ours.keys() == real.keys()
    for name, (kind, label_sets) in real.items():
        assert ours[name] == (kind, label_sets), name
    # the `_created` series are families of their own, as in the recording
    assert ours["vllm:prompt_tokens_created"][0] == "gauge"
    # and the same HELP texts, in the same order
    helps = [line for line in resp.text.splitlines() if line.startswith("# HELP")]
    assert helps == [line for line in recorded["body"].splitlines() if line.startswith("# HELP")]


def test_cache_config_info_carries_the_recorded_labels_and_the_memory_model(tiny):
    text = httpx.get(f"{tiny.base_url}/metrics").text
    ours = next(
        f for f in text_string_to_metric_families(text) if f.name == "vllm:cache_config_info"
    ).samples[0]
    real = next(
        f
        for f in text_string_to_metric_families(recorded_exchange("metrics_after")["body"])
        if f.name == "vllm:cache_config_info"
    ).samples[0]
    assert ours.labels.keys() == real.labels.keys()
    tokens = int(ours.labels["kv_cache_size_tokens"])
    assert f"GPU KV cache size: {tokens:,} tokens" in tiny.log_text()
    assert int(ours.labels["num_gpu_blocks"]) == tokens // int(ours.labels["block_size"])
    assert float(ours.labels["kv_cache_max_concurrency"]) == pytest.approx(tokens / 4096)
    assert ours.labels["gpu_memory_utilization"] == "0.3" == real.labels["gpu_memory_utilization"]


def test_running_waiting_kv_and_histograms_move_with_the_load(tmp_path):
    # 2 sequences at most, decoding slowly: 5 concurrent requests must show 2 running and 3 waiting.
    env = {**TINY_ENV, "EMU_DECODE_TOK_S": "5"}
    args = [*RECORDED_FLAGS[:-5], "--max-num-seqs", "2", "--enforce-eager"]
    with EmulatorProc.start(tmp_path, serve_args=args, env=env) as emu:
        before = httpx.get(f"{emu.base_url}/metrics").text
        replies: list[dict] = []
        threads = [
            threading.Thread(target=lambda: replies.append(chat(emu.base_url, 12)))
            for _ in range(5)
        ]
        for t in threads:
            t.start()
        seen: set[tuple[float, float, bool]] = set()
        deadline = time.monotonic() + 30
        while any(t.is_alive() for t in threads) and time.monotonic() < deadline:
            text = httpx.get(f"{emu.base_url}/metrics").text
            kv = value(text, "vllm:kv_cache_usage_perc")
            seen.add(
                (
                    value(text, "vllm:num_requests_running"),
                    value(text, "vllm:num_requests_waiting"),
                    kv > 0,
                )
            )
            time.sleep(0.02)
        for t in threads:
            t.join()
        assert (2.0, 3.0, True) in seen  # the admission cap holds the other three back
        assert all(running <= 2 for running, _, _ in seen)
        after = httpx.get(f"{emu.base_url}/metrics").text
    assert (
        value(after, "vllm:num_requests_running") == 0 == value(after, "vllm:kv_cache_usage_perc")
    )
    prompt = sum(r["usage"]["prompt_tokens"] for r in replies)
    generated = sum(r["usage"]["completion_tokens"] for r in replies)
    assert (
        value(after, "vllm:prompt_tokens_total") - value(before, "vllm:prompt_tokens_total")
        == prompt
    )
    assert value(after, "vllm:generation_tokens_total") == generated
    assert value(after, "vllm:prefix_cache_queries_total") == prompt
    finished = sum(
        value(after, "vllm:request_success_total", finished_reason=r) for r in ("stop", "length")
    )
    assert finished == 5
    for name in (
        "time_to_first_token_seconds",
        "e2e_request_latency_seconds",
        "request_queue_time_seconds",
    ):
        assert value(after, f"vllm:{name}_count") == 5
        assert value(after, f"vllm:{name}_bucket", le="+Inf") == 5
    # three requests waited behind the first two: at least ~one decode each
    assert value(after, "vllm:request_queue_time_seconds_sum") > 0.5
    assert value(after, "vllm:inter_token_latency_seconds_count") == generated - 5
    assert value(after, "vllm:iteration_tokens_total_sum") == prompt + generated


def test_speculative_decoding_counters(tmp_path):
    args = [
        *RECORDED_FLAGS,
        "--speculative-config",
        '{"method": "mtp", "num_speculative_tokens": 3}',
    ]
    with EmulatorProc.start(tmp_path, serve_args=args, env=TINY_ENV) as emu:
        replies = [chat(emu.base_url, 30) for _ in range(3)]
        text = httpx.get(f"{emu.base_url}/metrics").text
    drafts = value(text, "vllm:spec_decode_num_drafts_total")
    accepted = [
        value(text, "vllm:spec_decode_num_accepted_tokens_per_pos_total", position=str(i))
        for i in range(3)
    ]
    assert value(text, "vllm:spec_decode_num_draft_tokens_total") == 3 * drafts > 0
    assert sum(accepted) == value(text, "vllm:spec_decode_num_accepted_tokens_total")
    assert drafts >= accepted[0] >= accepted[1] >= accepted[2] > 0
    # every emitted token is a draft step's own token or an accepted one
    assert drafts + sum(accepted) == sum(r["usage"]["completion_tokens"] for r in replies)


def test_http_families_count_requests_by_route_method_and_status_class(tiny):
    def requests(text: str) -> dict[tuple, float]:
        found = samples(text)
        return {k: v for k, v in found.items() if k[0] == "http_requests_total"}

    before = requests(httpx.get(f"{tiny.base_url}/metrics").text)
    httpx.get(f"{tiny.base_url}/v1/models")
    httpx.get(f"{tiny.base_url}/health")  # not counted, as in vLLM
    httpx.post(f"{tiny.base_url}/tokenize", json={"model": "tiny", "prompt": "hi"})
    httpx.post(f"{tiny.base_url}/v1/chat/completions", content=b"{not json")
    text = httpx.get(f"{tiny.base_url}/metrics").text
    after = requests(text)

    def grew(handler: str, method: str, status: str) -> float:
        key = (
            "http_requests_total",
            (("handler", handler), ("method", method), ("status", status)),
        )
        return after[key] - before.get(key, 0)

    assert grew("/v1/models", "GET", "2xx") == 1 and grew("/tokenize", "POST", "2xx") == 1
    assert grew("/v1/chat/completions", "POST", "4xx") == 1
    assert not any(dict(k[1])["handler"] in ("/health", "/metrics") for k in after)
    assert value(text, "http_request_size_bytes_sum", handler="/v1/chat/completions") >= len(
        b"{not json"
    )
    assert value(text, "http_request_duration_highr_seconds_count") == sum(after.values())
