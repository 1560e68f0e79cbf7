"""The non-default args line of a startup log: read as data without evaluating anything (pyliteral.py),
and compared with a profile's flags (startup.mismatches, pyliteral.same_value)."""

from __future__ import annotations

import pytest

from composegen.vllm.pyliteral import LiteralError, parse_literal, same_value
from composegen.vllm.startup import mismatches, parse_startup_log

from .test_startup import report_of

R33_PROFILE = {  # the 8192-131k profile's vLLM flags as a profile states them
    "model": "deepseek-ai/DeepSeek-V4-Flash-0731",
    "revision": "9e165c30e2704aec5d9d593cce3eebd58bbef1cb",
    "tensor-parallel-size": 2,
    "max-model-len": 131072,
    "max-num-seqs": 1,
    "max-num-batched-tokens": 8192,
    "gpu-memory-utilization": 0.975,
    "kv-cache-dtype": "fp8",
    "block-size": 256,
    "load-format": "instanttensor",
    "enable-chunked-prefill": True,
    "enable-prefix-caching": True,
    "async-scheduling": True,
    "served-model-name": "ds4-flash-r33-b8192",
    "tool-call-parser": "deepseek_v4",
    "compilation-config": {"cudagraph_mode": "FULL_AND_PIECEWISE", "custom_ops": ["all"]},
}


def test_effective_args_keep_reprs_as_text(data_dir):
    args = report_of(data_dir, "vllm-0.33.0-r33-8192-arm.log")["effective_args"]
    assert args["max_num_batched_tokens"] == 8192 and args["gpu_memory_utilization"] == 0.975
    assert args["enable_chunked_prefill"] is True and args["served_model_name"] == [
        "ds4-flash-r33-b8192"
    ]
    assert args["compilation_config"] == {
        "cudagraph_mode": "<CUDAGraphMode.FULL_AND_PIECEWISE: (2, 1)>",
        "custom_ops": ["all"],
    }
    assert (
        report_of(data_dir, "vllm-0.16.0.log")["effective_args"]["download_dir"]
        == "PosixPath('/models/hf')"
    )
    nested = report_of(data_dir, "vllm-0.33.0-kv-too-small.log")["effective_args"][
        "compilation_config"
    ]
    assert nested["dynamic_shapes_config"]["type"] == "<DynamicShapesType.BACKED: 'backed'>"


def test_malicious_looking_literal_is_not_executed(tmp_path):
    marker = tmp_path / "executed"
    text = (
        "(APIServer pid=1) INFO 01-01 00:00:00 [utils.py:1] non-default args: {'a': "
        f"__import__('os').system('touch {marker}'), 'b': open('{marker}', 'w'), 'c': [1, (2, 3)]}}"
    )
    args = parse_startup_log(text).effective_args
    assert not marker.exists()
    assert args == {
        "a": f"__import__('os').system('touch {marker}')",
        "b": f"open('{marker}', 'w')",
        "c": [1, [2, 3]],
    }
    assert (
        parse_literal(f"__import__('os').system('touch {marker}')")
        == f"__import__('os').system('touch {marker}')"
    )
    assert not marker.exists()


def test_truncated_args_line_gives_no_args():
    assert parse_startup_log("non-default args: {'model': 'x', 'port': 80").effective_args is None


def test_pyliteral_values():
    assert parse_literal(
        "{'a': -1.5e3, 'b': 0x1f, 'c': 'x' 'y', 'd': {1, 2}, 'e': b'raw', 'f': true}"
    ) == {
        "a": -1500.0,
        "b": 31,
        "c": "xy",
        "d": [1, 2],
        "e": "b'raw'",
        "f": True,
    }
    assert parse_literal("{'x': 'a'.join(['b', 'c']), 'y': <function f at 0x7f>}") == {
        "x": "'a'.join(['b', 'c'])",
        "y": "<function f at 0x7f>",
    }
    for bad in ("{'a': 1", "{'a': 'x}", "[1, (2]", "{'a': }"):
        with pytest.raises(LiteralError):
            parse_literal(bad)


def test_r33_profile_matches_its_engine_args(data_dir):
    args = report_of(data_dir, "vllm-0.33.0-r33-8192-arm.log")["effective_args"]
    assert mismatches(R33_PROFILE, args) == []
    other_arm = report_of(data_dir, "vllm-0.33.0-r33-4096-arm.log")["effective_args"]
    assert [m.model_dump() for m in mismatches(R33_PROFILE, other_arm)] == [
        {"flag": "max-num-batched-tokens", "profile": 8192, "engine": 4096},
        {
            "flag": "served-model-name",
            "profile": "ds4-flash-r33-b8192",
            "engine": ["ds4-flash-r33-b4096"],
        },
    ]


def test_mismatches_normalise_values():
    engine = {
        "max_num_batched_tokens": "4096",
        "enable_chunked_prefill": False,
        "api_key": "***",
        "speculative_config": '{"method": "dspark", "num_speculative_tokens": 5, "draft_tp": 1}',
        "kv_transfer_config": {"kv_connector": "OffloadingConnector", "kv_role": "kv_both"},
        "cudagraph": "<CUDAGraphMode.FULL: 2>",
    }
    profile = {
        "max-num-batched-tokens": 4096,
        "disable-chunked-prefill": True,
        "api-key": "secret",
        "speculative-config": {"method": "dspark", "num_speculative_tokens": 5},
        "kv_transfer_config": '{"kv_connector": "OffloadingConnector", "kv_role": "kv_both"}',
        "cudagraph": "FULL",
        "port": 8000,
        "kv-cache-dtype": "auto",
    }
    # absent port / kv-cache-dtype are at their catalog defaults
    assert mismatches(profile, engine) == []
    changed = mismatches(
        {
            "speculative-config": {"method": "mtp"},
            "max-num-seqs": 16,
            "port": 9000,
            "cudagraph": "PIECEWISE",
        },
        engine,
    )
    assert [m.model_dump() for m in changed] == [
        {
            "flag": "speculative-config",
            "profile": {"method": "mtp"},
            "engine": '{"method": "dspark", "num_speculative_tokens": 5, "draft_tp": 1}',
        },
        {"flag": "max-num-seqs", "profile": 16, "engine": None},
        {"flag": "port", "profile": 9000, "engine": 8000},
        {"flag": "cudagraph", "profile": "PIECEWISE", "engine": "<CUDAGraphMode.FULL: 2>"},
    ]
    with pytest.raises(ValueError):
        mismatches({"port": 1}, None)


@pytest.mark.parametrize(
    "profile, engine, same",
    [
        (4096, "4096", True),
        (0.975, "0.975", True),
        (True, 1, False),
        (1, True, False),
        ("x", ["x"], True),
        (["a", "b"], ["a", "b"], True),
        (["a"], ["a", "b"], False),
        ("backed", "<DynamicShapesType.BACKED: 'backed'>", True),
        (None, None, True),
        ("fp8", "fp8_e4m3", False),
    ],
)
def test_same_value(profile, engine, same):
    assert same_value(profile, engine) is same
