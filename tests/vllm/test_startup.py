"""startup.py: the recorded logs of tests/data/logs parse to their numbers; failures carry kinds and
hints; the text format. The non-default args line and mismatches(): test_startup_args.py."""

from __future__ import annotations

import json

import pytest

from composegen.vllm.startup import StartupReport, format_text, parse_startup_log

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


def test_ansi_colour_is_stripped_before_matching(data_dir):
    raw = (data_dir / "logs" / "vllm-0.11.0-tp2-ansi.log").read_text()
    assert "\x1b[1;36m" in raw
    assert "\x1b" not in json.dumps(report_of(data_dir, "vllm-0.11.0-tp2-ansi.log"))
    line = (
        "\x1b[0;36m(Worker_TP0 pid=9)\x1b[0;0m \x1b[32mINFO\x1b[0m \x1b[90m11-20 10:00:00\x1b[0m "
        "\x1b[90m[gpu_worker.py:772]\x1b[0m Available KV cache memory: 3.5 GiB"
    )
    assert parse_startup_log(line).kv_cache_gib_per_rank == [3.5]
    prefix = (
        "\x1b[0;36m(EngineCore pid=4)\x1b[0;0m \x1b[31mERROR\x1b[0m \x1b[90m11-20 10:00:00\x1b[0m "
        "\x1b[90m[core.py:1584]\x1b[0m "
    )
    errors = parse_startup_log(
        f"{prefix}Traceback (most recent call last):\n{prefix}KeyError: 'rope'"
    ).to_json()["errors"]
    assert errors == [
        {
            "line": "(EngineCore pid=4) ERROR 11-20 10:00:00 [core.py:1584] KeyError: 'rope'",
            "kind": "exception",
            "hint": errors[0]["hint"],
            "estimated_max_model_len": None,
        }
    ]


def test_per_rank_lines_are_kept_per_rank_and_sorted_by_rank():
    text = (
        "(Worker_TP1 pid=2) INFO 01-01 00:00:01 [gpu_worker.py:298] Available KV cache memory: 9.50 GiB\n"
        "(Worker_TP0 pid=1) INFO 01-01 00:00:01 [gpu_worker.py:298] Available KV cache memory: 9.75 GiB\n"
        "(Worker_TP1 pid=2) INFO 01-01 00:00:01 [gpu_worker.py:298] Available KV cache memory: 1.00 GiB\n"
    )
    report = parse_startup_log(text)
    assert report.kv_cache_gib_per_rank == [9.75, 9.5]  # a rank's repeat does not add a rank
    assert report.kv_cache_gib_min == 9.5


def test_repeated_kv_lines_are_deduplicated_and_the_unified_smallest_is_kept(data_dir):
    raw = (data_dir / "logs" / "vllm-0.11.0-tp2-ansi.log").read_text()
    assert raw.count("GPU KV cache size: 453,728 tokens") == 2
    assert report_of(data_dir, "vllm-0.11.0-tp2-ansi.log")["kv_cache_tokens"] == 453728
    raw = (data_dir / "logs" / "vllm-0.10.2-tp2.log").read_text()
    # one per worker before unify_kv_cache_configs
    assert "288,768 tokens" in raw and "288,352 tokens" in raw


def test_prefixes_of_every_kind_are_understood():
    lines = [
        "node-a (Worker_TP0 pid=5) INFO 11-20 10:00:00 [gpu_worker.py:772] Available KV cache memory: 4.25 GiB\r",
        "(Worker_TP1 pid=6) node-a WARNING 11-20 10:00:00 [gpu_worker.py:772] Available KV cache memory: 4.0 GiB",
        "vllm-1  | (APIServer pid=1) INFO:     Application startup complete.",
        "2026-08-29T04:19:58.174993201Z GPU KV cache size: 1,000 tokens",
    ]
    report = parse_startup_log("\n".join(lines))
    assert report.kv_cache_gib_per_rank == [4.25, 4.0]
    assert report.ready is True and report.kv_cache_tokens == 1000 and report.lines_parsed == 4


def test_kv_too_small_error_has_hint_and_estimated_length(data_dir):
    errors = report_of(data_dir, "vllm-0.33.0-kv-too-small.log")["errors"]
    # logged twice, reported once
    assert [e["kind"] for e in errors] == ["kv_too_small_for_max_len"]
    assert errors[0]["estimated_max_model_len"] == 85264
    assert "max seq len (131072)" in errors[0]["line"] and errors[0]["hint"].endswith(".")


def test_shm_errors(data_dir):
    errors = report_of(data_dir, "vllm-0.33.0-shm-insufficient.log")["errors"]
    assert [e["kind"] for e in errors] == ["shm_insufficient"]
    assert "160 MiB required, 63 MiB free" in errors[0]["line"] and "shm_size" in errors[0]["hint"]
    report = report_of(data_dir, "vllm-0.28.0.log")  # a slow load: warned, yet ready
    assert report["ready"] is True and [e["kind"] for e in report["errors"]] == [
        "shm_broadcast_block"
    ]


@pytest.mark.parametrize(
    "line, kind",
    [
        (
            "(Worker_TP0 pid=3) INFO 01-01 00:00:00 [gpu_worker.py:298] Available KV cache memory: -2.81 GiB",
            "no_cache_memory",
        ),
        (
            "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
            "initializing the engine.",
            "no_cache_memory",
        ),
        (
            "TimeoutError: Timed out waiting for engine core processes to start. This is often caused by slow weight "
            "loading for large models. Waited 600s (configured by VLLM_ENGINE_READY_TIMEOUT_S).",
            "engine_ready_timeout",
        ),
        (
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
            "79.19 GiB of which 1.06 GiB is free.",
            "cuda_oom",
        ),
        (
            "ValueError: Free memory on device cuda:0 (40.1/79.19 GiB) on startup is less than desired GPU memory "
            "utilization (0.92, 72.85 GiB). Decrease GPU memory utilization or reduce GPU memory used by other "
            "processes.",
            "gpu_memory_busy",
        ),
        (
            "misc NCCL WARN Error: failed to extend /dev/shm/nccl-03v824 to 9637892 bytes",
            "shm_insufficient",
        ),
    ],
)
def test_failure_kinds(line, kind):
    errors = parse_startup_log(line).to_json()["errors"]
    assert [e["kind"] for e in errors] == [kind] and errors[0]["hint"]


def test_repeated_warning_is_reported_once():
    line = (
        "(EngineCore pid=9) INFO 01-01 00:01:00 [shm_broadcast.py:801] No available shared memory broadcast "
        "block found in 60 seconds. This typically happens when some processes are hanging."
    )
    assert len(parse_startup_log("\n".join([line] * 3)).errors) == 1


def test_unknown_traceback_reports_its_last_exception_line():
    text = "\n".join(
        [
            "(EngineCore pid=2) ERROR 01-01 00:00:00 [core.py:1584] EngineCore failed to start.",
            "(EngineCore pid=2) ERROR 01-01 00:00:00 [core.py:1584] Traceback (most recent call last):",
            '(EngineCore pid=2) ERROR 01-01 00:00:00 [core.py:1584]   File "x.py", line 1, in f',
            "(EngineCore pid=2) ERROR 01-01 00:00:00 [core.py:1584] KeyError: 'rope_scaling'",
            "Traceback (most recent call last):",
            "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
        ]
    )
    errors = parse_startup_log(text).to_json()["errors"]
    assert [e["kind"] for e in errors] == ["exception"]
    assert errors[0]["line"].endswith("KeyError: 'rope_scaling'")
    assert parse_startup_log("ValueError: not after a traceback").errors == []


def test_free_memory_line_variants_and_fallbacks():
    old = (
        "Free memory on device (78.62/79.25 GiB) on startup. Desired GPU memory utilization is (0.9, 71.33 GiB). "
        "Actual usage is 30.53 GiB for weight, 4.87 GiB for peak activation, 0.67 GiB for non-torch memory, and "
        "1.12 GiB for CUDAGraph memory. Current kv cache memory in use is 37849202278 bytes."
    )
    report = parse_startup_log(old)
    assert (report.weights_gib, report.peak_activation_gib, report.cuda_graph_gib) == (
        30.53,
        4.87,
        1.12,
    )
    assert report.kv_cache_gib_per_rank == [35.25]  # bytes, as GiB rounded like vLLM
    fallback = parse_startup_log(
        "Model loading took 12.0 GiB memory and 3.1 seconds\n"
        "Memory profiling takes 4.00 seconds. Total non KV cache memory: 14.0GiB; torch peak memory increase: "
        "1.5GiB; total consumed (from mem_get_info): 12.5GiB; weights memory: 12.0GiB."
    )
    assert (fallback.weights_gib, fallback.peak_activation_gib, fallback.gpu_total_gib) == (
        12.0,
        1.5,
        None,
    )


def test_format_text_aligns_keys_and_shows_hints(data_dir):
    report = parse_startup_log((data_dir / "logs" / "vllm-0.33.0-kv-too-small.log").read_text())
    text = format_text(report)
    lines = text.splitlines()
    assert lines[0].startswith("kv_cache_tokens:") and lines[0].endswith(" -")
    top_level = [line for line in lines if not line.startswith(" ")]
    value_columns = {len(line) - len(line.split(":", 1)[1].lstrip()) for line in top_level}
    assert len(value_columns) == 1  # every value starts in the same column
    assert "hint: Lower --max-model-len to what fits (at most 85264)" in text
    assert "[kv_too_small_for_max_len] (estimated max model len 85264)" in text
    assert isinstance(report, StartupReport)
