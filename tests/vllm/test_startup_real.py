"""The startup parser on a real vLLM 0.26.0 server's logs (tests/data/real-0.26.0-h200, copied unchanged from
shared/real-vllm): every field exact; runtime errors after ready kept apart; a truncated args line and
hostile streams (no newline, /dev/zero, over-long lines) handled in bounded memory."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from composegen.vllm.logstream import Limits, read_blocks
from composegen.vllm.startup import (
    StartupCheck,
    format_text,
    mismatches,
    parse_startup_log,
    parse_startup_stream,
)

REAL = Path(__file__).resolve().parents[1] / "data" / "real-0.26.0-h200"
ARGS = {
    "model_tag": "/models/tiny-llama",
    "host": "127.0.0.1",
    "model": "/models/tiny-llama",
    "max_model_len": 4096,
    "enforce_eager": True,
    "served_model_name": ["tiny"],
    "gpu_memory_utilization": 0.3,
    "max_num_batched_tokens": 2048,
    "max_num_seqs": 4,
}
COMMON = dict(
    max_model_len=4096,
    gpu_total_gib=139.8,
    gpu_free_gib=139.29,
    gpu_memory_utilization=0.3,
    cuda_graph_gib=0.0,
    peak_activation_gib=0.04,
    non_torch_gib=0.22,
    compile_seconds=None,  # --enforce-eager: nothing compiled
    kv_cache_includes_host=False,
    vllm_version="0.26.0",  # only in the logo line
    ready=True,
    server_address="http://127.0.0.1:8000",
    errors=[],
    warnings=[],
    cuda_graph_seconds=None,  # --enforce-eager: no capture
    cache=None,  # --enforce-eager: no torch.compile, no compile cache
    cache_directory=None,
    cache_reused=[],
    cache_compiled=[],
    graph_compile_seconds=None,
    graph_load_seconds=None,
)
EXPECTED = {
    "serve-bf16-eager.log": dict(
        COMMON,
        kv_cache_tokens=21_847_200,
        max_concurrency=5333.79,
        kv_cache_gib_per_rank=[41.67],
        kv_cache_gib_min=41.67,
        weights_gib=0.01,
        engine_init_seconds=12.23,
        effective_args=ARGS,
        runtime_errors=[],
        lines_parsed=139,
    ),
    "serve-fp8-hermes-apikey.log": dict(
        COMMON,
        kv_cache_tokens=43_661_648,
        max_concurrency=10659.58,
        kv_cache_gib_per_rank=[41.64],
        kv_cache_gib_min=41.64,
        weights_gib=0.04,
        engine_init_seconds=2.99,
        effective_args=dict(
            ARGS,
            enable_auto_tool_choice=True,
            tool_call_parser="hermes",
            api_key="***",  # the key itself is never shown
            kv_cache_dtype="fp8",
        ),
        runtime_errors=[
            {
                "line": "(APIServer pid=1751) ERROR 11-30 15:53:05 [hermes_tool_parser.py:117] "
                "json.decoder.JSONDecodeError: Unterminated string starting at: line 3 column 1 (char 47)",
                "kind": "exception",
                "hint": "Raised while serving a request after the server was ready; the server kept serving. Read "
                "the traceback that ends here (often a tool or reasoning parser failing on the model's output).",
                "estimated_max_model_len": None,
            }
        ],
        lines_parsed=139,
    ),
    "serve-failed-missing-module.log": dict(
        kv_cache_tokens=None,
        max_concurrency=None,
        max_model_len=4096,
        kv_cache_gib_per_rank=[],
        kv_cache_gib_min=None,
        weights_gib=0.01,
        peak_activation_gib=None,
        non_torch_gib=None,
        gpu_total_gib=None,
        gpu_free_gib=None,
        gpu_memory_utilization=None,
        cuda_graph_gib=None,
        kv_cache_includes_host=False,
        errors=[
            {
                "line": "(EngineCore pid=927) ERROR 11-30 15:49:08 [core.py:1330] ModuleNotFoundError: No module "
                "named 'flashinfer'",
                "kind": "missing_module",
                "hint": "The image lacks a Python module this vLLM build needs (named in the line): use an image "
                "built for this vLLM version and GPU, or one that installs the module.",
                "estimated_max_model_len": None,
            }
        ],
        engine_init_seconds=None,
        compile_seconds=None,
        vllm_version="0.26.0",
        ready=False,
        server_address=None,
        effective_args=ARGS,
        runtime_errors=[],
        warnings=[],
        lines_parsed=151,
        cuda_graph_seconds=None,
        cache=None,  # failed before torch.compile
        cache_directory=None,
        cache_reused=[],
        cache_compiled=[],
        graph_compile_seconds=None,
        graph_load_seconds=None,
    ),
}
# CUDA graphs and torch.compile on, hermes tool parser
GRAPHS = REAL.with_name("real-0.26.0-h200-graphs")


def test_real_graphs_log_parses_exactly_with_the_capture_seconds():
    report = parse_startup_log(
        (GRAPHS / "serve-hermes-graphs.log").read_text(encoding="utf-8")
    ).to_json()
    runtime = report.pop("runtime_errors")
    assert report == dict(
        COMMON,
        kv_cache_tokens=21_816_480,
        max_concurrency=5326.29,
        kv_cache_gib_per_rank=[41.61],
        kv_cache_gib_min=41.61,
        weights_gib=0.01,
        peak_activation_gib=0.1,
        cuda_graph_gib=0.07,  # `Graph capturing finished in 1 secs, took 0.07 GiB`
        cuda_graph_seconds=1.0,
        # `init engine (profile, create kv cache, warmup model) took 23.01 s`
        engine_init_seconds=23.01,
        compile_seconds=10.04,  # `(compilation: 10.04 s)`
        # an empty cache: `Compiling a graph for compile range (1, 2048) takes 7.49 s`, AOT saved
        cache="cold",
        cache_directory="/root/.cache/vllm/torch_compile_cache/80583b7327/rank_0_0/backbone",
        cache_compiled=["graph for compile range (1, 2048)", "AOT compilation"],
        graph_compile_seconds=7.49,
        effective_args={
            "model_tag": "/tmp/model",
            "enable_auto_tool_choice": True,
            "tool_call_parser": "hermes",
            "host": "127.0.0.1",
            "model": "/tmp/model",
            "max_model_len": 4096,
            "served_model_name": ["tiny"],
            "gpu_memory_utilization": 0.3,
            "max_num_batched_tokens": 2048,
            "max_num_seqs": 4,
        },
        lines_parsed=2153,
    )
    # the seven hermes tracebacks after ready (the random model writes noise): runtime errors, not failures
    assert len(runtime) == 7 and all(
        e["kind"] == "exception" and "JSONDecodeError" in e["line"] for e in runtime
    )


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_log_parses_exactly(name):
    report = parse_startup_log((REAL / name).read_text(encoding="utf-8")).to_json()
    assert report == EXPECTED[name]  # every key, exactly


def test_streamed_and_in_memory_parses_agree():
    for name in EXPECTED:
        with open(REAL / name, "rb") as stream:
            assert parse_startup_stream(stream) == parse_startup_log(
                (REAL / name).read_text(encoding="utf-8")
            )


def test_a_request_time_traceback_after_ready_is_a_runtime_error_not_a_startup_error():
    report = parse_startup_log((REAL / "serve-fp8-hermes-apikey.log").read_text(encoding="utf-8"))
    assert report.ready and report.errors == []
    [runtime] = report.runtime_errors
    assert runtime.kind == "exception" and runtime.line.endswith(
        "JSONDecodeError: Unterminated string starting at: line 3 column 1 (char 47)"
    )
    assert "[hermes_tool_parser.py:117]" in runtime.line and "kept serving" in runtime.hint
    assert "sk-test" not in report.model_dump_json() and "sk-test" not in format_text(report)
    assert "runtime_errors:" in format_text(report)


def test_an_engine_death_after_ready_is_still_an_error():
    text = (REAL / "serve-bf16-eager.log").read_text(encoding="utf-8") + (
        "(APIServer pid=1371) ERROR 11-30 15:52:10 [core_client.py:600] Engine core proc EngineCore died "
        "unexpectedly, shutting down client.\n"
    )
    report = parse_startup_log(text)
    assert [e.kind for e in report.errors] == ["engine_dead"] and report.runtime_errors == []


def test_failed_start_names_the_missing_module():
    report = parse_startup_log(
        (REAL / "serve-failed-missing-module.log").read_text(encoding="utf-8")
    )
    assert [e.kind for e in report.errors] == ["missing_module"]
    assert (
        report.errors[0].line.endswith("No module named 'flashinfer'")
        and "image" in report.errors[0].hint
    )


def test_compile_seconds_from_both_line_formats():
    init = (
        "(EngineCore pid=1) INFO 11-30 15:51:54 [core.py:347] init engine (profile, create kv cache, "
        "warmup model) took 25.46 s (compilation: 12.57 s)"
    )
    assert parse_startup_log(init).compile_seconds == 12.57
    assert parse_startup_log(init).engine_init_seconds == 25.46
    em_dash = init.replace("12.57 s)", "41.37 s — language_model: 39.02 s, encoder: 2.35 s)")
    assert parse_startup_log(em_dash).compile_seconds == 41.37
    total = "(EngineCore pid=1) INFO 11-21 13:41:05 [compilation/monitor.py:53] torch.compile took 21.36 s in total"
    assert parse_startup_log(total).compile_seconds == 21.36
    assert parse_startup_log(total.replace("took", "takes")).compile_seconds == 21.36


def test_truncated_args_line_warns_and_leaves_args_unknown():
    text = (REAL / "serve-bf16-eager.log").read_text(encoding="utf-8")
    cut = text.replace("'max_num_seqs': 4}", "'max_num_se", 1)
    report = parse_startup_log(cut)
    assert report.effective_args is None
    [warning] = report.warnings
    assert "non-default args" in warning and "cut off" in warning and "not compared" in warning
    assert "warning: the `non-default args:` line is cut off" in format_text(report)
    assert report.to_json()["warnings"] == [warning]
    with pytest.raises(ValueError):
        mismatches({"max-num-seqs": 4}, report.effective_args)
    assert StartupCheck(**report.model_dump()).mismatches is None  # unknown, not "no mismatches"


def test_dev_zero_stops_after_a_bounded_read():
    limits = Limits(max_bytes_without_newline=4 << 20)
    with open("/dev/zero", "rb") as zero:
        report = parse_startup_stream(zero, limits)
    assert limits.bytes_read <= (4 << 20) + (1 << 20)
    assert report.ready is False and any("without a line break" in w for w in report.warnings)


def test_over_long_lines_are_cut_and_the_rest_still_parses():
    long_line = b"x" * (3 << 20) + b"\n"
    kv = b"(EngineCore pid=1) INFO 11-30 15:51:46 [kv_cache_utils.py:2177] GPU KV cache size: 1,234 tokens\n"
    limits = Limits(max_line_bytes=1 << 20)
    report = parse_startup_stream(io.BytesIO(long_line + kv + long_line[:-1]), limits)
    assert report.kv_cache_tokens == 1234 and report.lines_parsed == 3
    assert any("2 line(s) longer than 1.0 MiB" in w for w in report.warnings)


def test_read_blocks_splits_like_splitlines_across_chunk_edges():
    text = "a\r\nb\rc\n\nd" + "e" * 5000 + "\nlast"
    chunks = io.BufferedReader(io.BytesIO(text.encode()), buffer_size=7)  # type: ignore[arg-type]
    lines = [line for block in read_blocks(chunks) for line in block.split("\n")]
    assert lines == text.replace("\r\n", "\n").splitlines()


def test_total_limit_stops_the_read():
    limits = Limits(max_total_bytes=2 << 20)
    report = parse_startup_stream(io.BytesIO(b"hello\n" * (1 << 20)), limits)
    assert limits.bytes_read == 2 << 20 and any(
        "stopped reading after" in w for w in report.warnings
    )


def test_the_report_validates_against_its_generated_schema():
    import jsonschema

    from composegen.cli import reports

    schema = reports.schema("startup")
    for name in EXPECTED:
        report = parse_startup_log((REAL / name).read_text(encoding="utf-8")).to_json()
        jsonschema.validate({**report, "mismatches": None}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**report, "surprise": 1}, schema)  # a key the schema does not show
