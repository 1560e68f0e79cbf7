"""startup.py's failures: each kind, with its hint (and an estimated length where vLLM gives one),
reported once however often it is logged; an unknown traceback by its last exception line."""

from __future__ import annotations

import pytest

from composegen.vllm.startup import parse_startup_log


def report_of(data_dir, name: str) -> dict:
    return parse_startup_log((data_dir / "logs" / name).read_text(encoding="utf-8")).to_json()


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
