"""The emulator's `vllm serve` argv handling: accepted like vLLM's parser, rejected with exit 2 like it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from composegen.emulator.argv import human_readable_int, parse_serve_args
from tests.support.ports import free_port


def _run(args: list[str], **env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "composegen.emulator", *args],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, **env},
    )


def test_abbreviated_flag_is_accepted_and_logged_as_non_default(tmp_path):
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "composegen.emulator",
            "serve",
            "m",
            "--max-num-batched-token",
            "4096",
            "--port",
            str(free_port()),
            "--host",
            "127.0.0.1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "EMU_SHM_DIR": str(tmp_path), "EMU_LOAD_SECONDS": "0.2"},
    )
    try:
        seen = ""
        deadline = time.monotonic() + 20
        while "non-default args" not in seen and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            seen = line
        assert "non-default args" in seen, proc.stderr.read()
        assert "'max_num_batched_tokens': 4096" in seen
        assert "'model': 'm'" in seen
        # defaults are not listed
        assert "'port'" in seen and "'gpu_memory_utilization'" not in seen
    finally:
        proc.send_signal(signal.SIGTERM)
        _out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0


def test_bad_value_exits_2_with_vllm_error():
    result = _run(["serve", "m", "--max-num-batched-tokens", "lots"])
    assert result.returncode == 2
    assert "vllm serve: error:" in result.stderr
    assert "invalid human_readable_int value: 'lots'" in result.stderr
    assert result.stdout == ""  # nothing started


def test_unknown_flag_exits_2():
    result = _run(["serve", "m", "--no-such-flag"])
    assert result.returncode == 2
    assert "vllm serve: error: unrecognized arguments: --no-such-flag" in result.stderr


def test_not_serve_subcommand_and_version():
    bad = _run(["sevre", "m"])
    assert bad.returncode == 2 and "vllm: error:" in bad.stderr
    version = _run(["--version"])
    assert version.returncode == 0 and version.stdout.strip() == "0.33.0+composegen-emulator"


def test_bad_emulator_setting_is_a_usage_error():
    result = _run(["serve", "m"], EMU_GPU_GIB="lots")
    assert result.returncode == 2 and "EMU_GPU_GIB='lots' is not a number" in result.stderr


@pytest.mark.parametrize(
    "text, expected",
    [
        ("4096", 4096),
        ("4k", 4000),
        ("4K", 4096),
        ("1.5k", 1500),
        ("2M", 2 * 1024**2),
        ("1g", 10**9),
    ],
)
def test_human_readable_int(text, expected):
    assert human_readable_int(text) == expected


def test_types_choices_and_switches():
    args = parse_serve_args(
        [
            "org/model",
            "--max_model_len",
            "128K",
            "-tp",
            "2",
            "--served-model-name",
            "a",
            "b",
            "--disable-prefix-caching",
            "--enable-expert-parallel",
            "--kv-offloading-size",
            "8",
            "--kv-cache-dtype",
            "fp8",
            "--dtype",
            "bfloat16",
            "--api-key",
            "k1",
            "k2",
            "--pt-load-map-location",
            "cuda:0",
            "--max-lora-rank",
            "8",
        ]
    )
    values = args.values
    assert values["model"] == "org/model" and values["model_tag"] == "org/model"
    assert values["max_model_len"] == 131072
    assert values["tensor_parallel_size"] == 2
    assert values["served_model_name"] == ["a", "b"]
    assert values["enable_prefix_caching"] is False and values["enable_expert_parallel"] is True
    assert values["kv_offloading_size"] == 8.0 and values["max_lora_rank"] == 8
    assert values["api_key"] == ["k1", "k2"]
    assert values["pt_load_map_location"] == "cuda:0"  # union_dict_and_str keeps non-JSON text
    assert values["port"] == 8000 and "port" not in args.non_default
    assert args.non_default["dtype"] == "bfloat16"


def test_max_model_len_auto_and_negative_switch():
    assert parse_serve_args(["m", "--max-model-len", "auto"]).values["max_model_len"] == -1
    assert parse_serve_args(["m", "--no-enforce-eager"]).values["enforce_eager"] is False
    assert parse_serve_args(["m", "--enable-cascade-attn"]).values["disable_cascade_attn"] is False


def test_json_flags_parse_and_dotted_keys():
    args = parse_serve_args(
        [
            "m",
            "--speculative-config",
            '{"method": "mtp", "num_speculative_tokens": 1}',
            "--kv-transfer-config.kv_connector",
            "OffloadingConnector",
            "--kv-transfer-config.kv_connector_extra_config.cpu_bytes_to_use=1024",
        ]
    )
    assert args.values["speculative_config"] == {"method": "mtp", "num_speculative_tokens": 1}
    assert args.values["kv_transfer_config"] == {
        "kv_connector": "OffloadingConnector",
        "kv_connector_extra_config": {"cpu_bytes_to_use": 1024},
    }


@pytest.mark.parametrize(
    "argv, message",
    [
        (["m", "--speculative-config", "{not json"], "invalid _optional_type value"),
        (["m", "--compilation-config", "[1"], "invalid parse_dataclass value"),
        (["m", "--dtype", "float8"], "invalid choice: 'float8'"),
        (["m", "--max-num", "4"], "ambiguous option: --max-num could match"),
        (["m", "--max-model-len", "1.5K"], "Decimals are not allowed with binary suffixes"),
        (["m", "--port", "http"], "invalid int value: 'http'"),
        (["m", "--enforce-eager", "yes"], "unrecognized arguments: yes"),
    ],
)
def test_parse_errors_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        parse_serve_args(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "vllm serve: error:" in err and message in err
