"""startup.py, line by line: ANSI colour, every kind of prefix, per-rank lines, the free-memory line's
variants and fallbacks, and the text format."""

from __future__ import annotations

import json

from composegen.vllm.startup import StartupReport, format_text, parse_startup_log


def report_of(data_dir, name: str) -> dict:
    return parse_startup_log((data_dir / "logs" / name).read_text(encoding="utf-8")).to_json()


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
