"""startup.py: the recorded logs of tests/data/logs parse to their numbers. How single lines are read
(ANSI colour, prefixes, per-rank lines, the text format): test_startup_lines.py; failures and their
kinds and hints: test_startup_failures.py; the non-default args line and mismatches():
test_startup_args.py."""

from __future__ import annotations

import pytest

from composegen.vllm.startup import parse_startup_log

KEYS = [
    "kv_cache_tokens",
    "max_concurrency",
    "max_model_len",
    "kv_cache_gib_per_rank",
    "kv_cache_gib_min",
    "weights_gib",
    "peak_activation_gib",
    "gpu_total_gib",
    "gpu_free_gib",
    "gpu_memory_utilization",
    "cuda_graph_gib",
    "engine_init_seconds",
    "kv_cache_includes_host",
    "vllm_version",
    "ready",
    "server_address",
    "errors",
    "effective_args",
    "lines_parsed",
    "non_torch_gib",
    "compile_seconds",
    "runtime_errors",
    "warnings",
    "cuda_graph_seconds",
    "cache",
    "cache_directory",
    "cache_reused",
    "cache_compiled",
    "graph_compile_seconds",
    "graph_load_seconds",
]

# file -> the values a reader of that log finds in it (the rest of the keys are checked elsewhere)
EXPECTED = {
    "vllm-0.10.2-tp2.log": dict(
        cuda_graph_seconds=9.0,  # `Graph capturing finished in 9 secs`
        kv_cache_tokens=288352,
        max_concurrency=7.04,
        max_model_len=40960,
        kv_cache_gib_per_rank=[35.25, 35.2],
        kv_cache_gib_min=35.2,
        weights_gib=30.53,
        peak_activation_gib=4.87,
        gpu_total_gib=79.25,
        gpu_free_gib=78.62,
        gpu_memory_utilization=0.9,
        cuda_graph_gib=1.12,
        engine_init_seconds=97.48,
        kv_cache_includes_host=False,
        vllm_version="0.10.2",
        ready=True,
        server_address="http://0.0.0.0:8000",
    ),
    "vllm-0.11.0-tp2-ansi.log": dict(
        cuda_graph_seconds=9.0,  # `Graph capturing finished in 9 secs`
        kv_cache_tokens=453728,
        max_concurrency=6.92,
        max_model_len=65536,
        kv_cache_gib_per_rank=[34.62, 34.62],
        kv_cache_gib_min=34.62,
        weights_gib=33.88,
        peak_activation_gib=3.61,
        gpu_total_gib=79.19,
        gpu_free_gib=78.59,
        gpu_memory_utilization=0.92,
        cuda_graph_gib=0.87,
        engine_init_seconds=66.21,
        vllm_version="0.11.0",
        ready=True,
    ),
    "vllm-0.12.0-tp2.log": dict(
        cuda_graph_seconds=5.0,  # `Graph capturing finished in 5 secs`
        kv_cache_tokens=210304,
        max_concurrency=1.6,
        max_model_len=131072,
        kv_cache_gib_per_rank=[9.65, 9.63],
        kv_cache_gib_min=9.63,
        weights_gib=28.47,
        peak_activation_gib=2.31,
        gpu_total_gib=44.39,
        gpu_memory_utilization=0.92,
        cuda_graph_gib=0.46,
        engine_init_seconds=47.71,
        vllm_version="0.12.0",
    ),
    "vllm-0.16.0.log": dict(
        cuda_graph_seconds=6.0,  # `Graph capturing finished in 6 secs`
        kv_cache_tokens=327680,
        max_concurrency=2.5,
        max_model_len=131072,
        kv_cache_gib_per_rank=[40.0],
        kv_cache_gib_min=40.0,
        weights_gib=14.99,
        peak_activation_gib=None,
        gpu_total_gib=None,
        gpu_free_gib=None,
        gpu_memory_utilization=None,
        cuda_graph_gib=0.61,
        engine_init_seconds=17.93,
        vllm_version="0.16.0",
        ready=True,
    ),
    "vllm-0.28.0.log": dict(
        cuda_graph_seconds=7.0,  # `Graph capturing finished in 7 secs`
        kv_cache_tokens=1213664,
        max_concurrency=9.26,
        max_model_len=131072,
        kv_cache_gib_per_rank=[36.98, 36.98],
        weights_gib=32.88,
        peak_activation_gib=2.99,
        gpu_free_gib=78.53,
        cuda_graph_gib=0.83,
        engine_init_seconds=118.62,
        vllm_version="0.28.0",
        ready=True,
        server_address="http://0.0.0.0:8000",
    ),
    "vllm-0.30.0-offload.log": dict(
        cuda_graph_seconds=9.0,  # `Graph capturing finished in 9 secs`
        kv_cache_tokens=1572864,
        max_concurrency=6.0,
        max_model_len=262144,
        kv_cache_gib_per_rank=[61.17, 61.19],
        kv_cache_gib_min=61.17,
        gpu_total_gib=139.81,
        kv_cache_includes_host=True,
        engine_init_seconds=96.4,
        vllm_version="0.30.0",
        ready=True,
    ),
    "vllm-0.33.0-kv-too-small.log": dict(
        kv_cache_tokens=None,
        max_concurrency=None,
        max_model_len=131072,
        kv_cache_gib_per_rank=[20.82],
        weights_gib=61.03,
        peak_activation_gib=4.51,
        gpu_total_gib=None,
        cuda_graph_gib=None,
        engine_init_seconds=None,
        vllm_version="0.33.0",
        ready=False,
        server_address=None,
    ),
    "vllm-0.33.0-shm-insufficient.log": dict(
        kv_cache_tokens=None,
        max_concurrency=None,
        max_model_len=262144,
        kv_cache_gib_per_rank=[],
        kv_cache_gib_min=None,
        weights_gib=None,
        peak_activation_gib=None,
        gpu_total_gib=None,
        gpu_free_gib=None,
        gpu_memory_utilization=None,
        cuda_graph_gib=None,
        engine_init_seconds=None,
        vllm_version="0.33.0",
        ready=False,
        server_address=None,
    ),
    # the seed A/B arms (shared/seeds/r33-batch-token-ab.md)
    "vllm-0.33.0-r33-8192-arm.log": dict(
        cuda_graph_seconds=7.0,  # `Graph capturing finished in 7 secs`
        kv_cache_tokens=283917,
        max_concurrency=2.17,
        max_model_len=131072,
        kv_cache_gib_per_rank=[15.27, 15.28],
        kv_cache_gib_min=15.27,
        weights_gib=75.64,
        peak_activation_gib=1.73,
        gpu_total_gib=95.01,
        gpu_free_gib=93.84,
        gpu_memory_utilization=0.975,
        cuda_graph_gib=0.18,
        engine_init_seconds=153.46,
        kv_cache_includes_host=False,
        vllm_version="0.33.0",
        ready=True,
        server_address="http://127.0.0.1:39070",
        errors=[],
    ),
    "vllm-0.33.0-r33-4096-arm.log": dict(
        cuda_graph_seconds=7.0,  # `Graph capturing finished in 7 secs`
        kv_cache_tokens=553243,
        max_concurrency=4.22,
        max_model_len=131072,
        kv_cache_gib_per_rank=[15.99, 16.0],
        kv_cache_gib_min=15.99,
        weights_gib=75.51,
        peak_activation_gib=1.14,
        gpu_total_gib=95.01,
        gpu_memory_utilization=0.975,
        engine_init_seconds=153.46,
        ready=True,
        server_address="http://127.0.0.1:39071",
        errors=[],
    ),
}


def report_of(data_dir, name: str) -> dict:
    return parse_startup_log((data_dir / "logs" / name).read_text(encoding="utf-8")).to_json()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_recorded_log_parses_to_its_numbers(data_dir, name):
    report = report_of(data_dir, name)
    assert list(report) == KEYS
    for key, value in EXPECTED[name].items():
        assert report[key] == value, key
    assert report["lines_parsed"] == sum(
        1 for line in (data_dir / "logs" / name).read_text().splitlines() if line.strip()
    )


def test_every_recorded_log_is_covered(data_dir):
    assert {p.name for p in (data_dir / "logs").glob("*.log")} == set(EXPECTED)


def test_repeated_kv_lines_are_deduplicated_and_the_unified_smallest_is_kept(data_dir):
    raw = (data_dir / "logs" / "vllm-0.11.0-tp2-ansi.log").read_text()
    assert raw.count("GPU KV cache size: 453,728 tokens") == 2
    assert report_of(data_dir, "vllm-0.11.0-tp2-ansi.log")["kv_cache_tokens"] == 453728
    raw = (data_dir / "logs" / "vllm-0.10.2-tp2.log").read_text()
    # one per worker before unify_kv_cache_configs
    assert "288,768 tokens" in raw and "288,352 tokens" in raw
