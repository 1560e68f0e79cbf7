"""Semantic diff of compose stacks: normalisation, classification and output (inputs: test_diff_inputs.py)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from composegen.diff.argv import parse_vllm_args
from composegen.diff.semantic import (
    FUNCTIONAL,
    IDENTITY,
    compare,
    exit_status,
    format_text,
    load_side,
    unified,
)

MODEL = "/root/models/DeepSeek-V4-Flash-0731"


def stack(command=None, **service) -> dict:
    """A one-service stack in composegen's rendered shape, with overrides."""
    base = {
        "image": "vllm/vllm-openai@sha256:" + "a" * 64,
        "entrypoint": ["vllm", "serve"],
        "command": command if command is not None else [MODEL, "--max-num-batched-tokens", "8192"],
    }
    base.update(service)
    return {"name": "demo", "services": {"vllm": base}}


@pytest.fixture
def r33(diff_dir: Path, repo_root: Path):
    """The r33 A/B arms (8192 control, 4096 candidate) as loaded Sides."""
    return [load_side(str(diff_dir / f"r33-{arm}.yaml"), repo_root) for arm in (8192, 4096)]


# ---------------------------------------------------------------- vLLM argv


def test_flag_spellings_and_order_are_not_changes():
    a = stack(
        [
            MODEL,
            "--max-num-batched-tokens",
            "8192",
            "--tensor-parallel-size",
            "2",
            "--enforce-eager",
        ]
    )
    assert (
        compare(a, stack([MODEL, "--enforce-eager", "-tp=2", "--max_num_batched_tokens=8K"])) == []
    )


def test_flag_value_change_is_one_functional_change_with_typed_values():
    a = stack([MODEL, "--max-num-batched-tokens", "8192", "--gpu-memory-utilization", "0.975"])
    b = stack([MODEL, "--gpu-memory-utilization=0.9750", "--max-num-batched-tokens", "4096"])
    assert [c.report().to_json() for c in compare(a, b)] == [
        {
            "path": "services.vllm.command.--max-num-batched-tokens",
            "class": FUNCTIONAL,
            "before": 8192,
            "after": 4096,
        }
    ]


def test_human_readable_ints_follow_vllm_units():
    parsed = parse_vllm_args([MODEL, "--max-model-len", "128K", "--max-num-batched-tokens", "8k"])
    assert parsed["flags"] == {"--max-model-len": 131072, "--max-num-batched-tokens": 8000}
    assert parse_vllm_args(["--max-model-len", "-1"])["flags"] == {"--max-model-len": -1}


def test_booleans_negations_and_lists():
    parsed = parse_vllm_args(
        [
            MODEL,
            "--no-enable-prefix-caching",
            "--disable-log-requests",
            "--disable-uvicorn-access-log",
            "--enable-chunked-prefill",
            "--served-model-name",
            "a",
            "b",
            "--headless",
        ]
    )
    assert parsed["model"] == MODEL
    assert parsed["flags"] == {
        "--enable-prefix-caching": False,
        "--enable-log-requests": False,
        # Listed first in the catalog, so this spelling is the positive one.
        "--disable-uvicorn-access-log": True,
        "--enable-chunked-prefill": True,
        "--served-model-name": ["a", "b"],
        "--headless": True,
    }
    # 0.33 spells it --disable-prefix-caching; older releases used --no-enable-prefix-caching.
    a = stack([MODEL, "--disable-prefix-caching"])
    assert compare(a, stack([MODEL, "--no-enable-prefix-caching"])) == []
    [change] = compare(a, stack([MODEL, "--enable-prefix-caching"]))
    assert (change.path, change.before, change.after) == (
        "services.vllm.command.--enable-prefix-caching",
        False,
        True,
    )


def test_model_given_by_flag_or_position_is_the_same():
    a = stack([MODEL, "--max-num-seqs", "1"])
    assert compare(a, stack(["--max-num-seqs", "1", "--model", MODEL])) == []
    [change] = compare(a, stack(["other/model", "--max-num-seqs", "1"]))
    assert (change.path, change.before, change.after) == (
        "services.vllm.command.model",
        MODEL,
        "other/model",
    )


def test_absent_flag_differs_from_explicit_default_false():
    # The argv differs (and defaults move between releases), so this IS reported; the text notes the default.
    [change] = compare(stack([MODEL]), stack([MODEL, "--no-enforce-eager"]))
    assert (change.path, change.change_class, change.before, change.after) == (
        "services.vllm.command.--enforce-eager",
        FUNCTIONAL,
        None,
        False,
    )
    assert "(absent = vLLM 0.33.0 default false)" in format_text([change], "a", "b")


def test_json_valued_flags_compare_as_parsed_json():
    a = stack([MODEL, "--speculative-config", '{"method":"mtp","num_speculative_tokens":1}'])
    b = stack([MODEL, "--speculative-config", '{ "num_speculative_tokens": 1, "method": "mtp" }'])
    assert compare(a, b) == []
    c = stack([MODEL, "-sc", '{"method":"mtp","num_speculative_tokens":2}'])
    [change] = compare(a, c)
    assert change.path == "services.vllm.command.--speculative-config"
    assert change.after == {"method": "mtp", "num_speculative_tokens": 2}
    # "JSON keys passed individually" (`-cc.mode 3`) build the same object.
    d = stack([MODEL, "--compilation-config", '{"mode": 3, "cudagraph_mode": "FULL"}'])
    assert compare(d, stack([MODEL, "-cc.cudagraph_mode=FULL", "-cc.mode", "3"])) == []


def test_launcher_words_may_move_between_entrypoint_and_command():
    a = stack([MODEL, "--max-num-seqs", "1"])
    b = stack(["serve", MODEL, "--max-num-seqs", "1"], entrypoint=["vllm"])
    c = stack(f"vllm serve {MODEL} --max-num-seqs=1", entrypoint=None)
    assert compare(a, b) == [] and compare(a, c) == []


# ---------------------------------------------------------------- compose keys


def test_environment_list_and_map_forms_are_equal():
    a = stack(environment={"NCCL_DEBUG": "INFO", "NCCL_P2P_DISABLE": 1, "HF_TOKEN": None})
    b = stack(environment=["HF_TOKEN", "NCCL_P2P_DISABLE=1", "NCCL_DEBUG=INFO"])
    assert compare(a, b) == []
    c = stack(environment=["HF_TOKEN", "NCCL_P2P_DISABLE=1", "NCCL_DEBUG=WARN"])
    [change] = compare(b, c)
    assert (change.path, change.before, change.after) == (
        "services.vllm.environment.NCCL_DEBUG",
        "INFO",
        "WARN",
    )


def test_ulimit_int_equals_equal_soft_and_hard():
    a = stack(ulimits={"memlock": -1, "nofile": 1048576})
    b = stack(
        ulimits={
            "nofile": {"soft": 1048576, "hard": "1048576"},
            "memlock": {"soft": -1, "hard": -1},
        }
    )
    assert compare(a, b) == []
    c = stack(ulimits={"memlock": -1, "nofile": {"soft": 65536, "hard": 1048576}})
    [change] = compare(a, c)
    assert (change.path, change.after) == (
        "services.vllm.ulimits.nofile",
        {"soft": 65536, "hard": 1048576},
    )


def test_image_compared_by_digest_with_repo_reported_separately():
    digest = "sha256:" + "b" * 64
    a = stack(image=f"vllm/vllm-openai@{digest}")
    assert compare(a, stack(image=f"docker.io/vllm/vllm-openai:v0.33.0@{digest}")) == []
    moved = compare(a, stack(image=f"registry.local/vllm-openai@{digest}"))
    assert [(c.path, c.after) for c in moved] == [
        ("services.vllm.image.repo", "registry.local/vllm-openai")
    ]
    # Without a digest the (default) tag is what gets pulled; Docker Hub's implicit prefixes do not count.
    assert compare(stack(image="ubuntu"), stack(image="docker.io/library/ubuntu:latest")) == []
    [retagged] = compare(stack(image="ubuntu:24.04"), stack(image="ubuntu:24.10"))
    assert (retagged.path, retagged.after) == ("services.vllm.image.tag", "24.10")
    rebuilt = compare(a, stack(image="vllm/vllm-openai@sha256:" + "c" * 64))
    assert [(c.path, c.change_class) for c in rebuilt] == [
        ("services.vllm.image.digest", FUNCTIONAL)
    ]


def test_ports_volumes_gpus_and_sizes_in_equivalent_forms():
    a = stack(
        ports=["127.0.0.1:39070:8000"],
        volumes=[
            "/srv/models:/models:ro",
            "hf:/root/.cache/huggingface",
            "${TMP:-/tmp}:/container-tmp",
        ],
        gpus="all",
        shm_size="16gb",
        stop_grace_period="1m30s",
        healthcheck={"test": "curl -f localhost:8000/health", "interval": "10s"},
    )
    b = stack(
        ports=[{"target": 8000, "published": 39070, "host_ip": "127.0.0.1", "protocol": "tcp"}],
        volumes=[
            {"type": "volume", "source": "hf", "target": "/root/.cache/huggingface"},
            {"type": "bind", "source": "/srv/models", "target": "/models", "read_only": True},
            {"type": "bind", "source": "${TMP:-/tmp}", "target": "/container-tmp"},
        ],
        deploy={
            "resources": {"reservations": {"devices": [{"capabilities": ["gpu"], "count": -1}]}}
        },
        shm_size="16G",
        stop_grace_period="90s",
        healthcheck={"test": ["CMD-SHELL", "curl -f localhost:8000/health"], "interval": "10000ms"},
    )
    before = copy.deepcopy(b)
    assert compare(a, b) == []
    assert b == before  # normalising never mutates the caller's stack


def test_gpu_and_volume_changes_are_functional():
    a = stack(
        gpus=[{"driver": "nvidia", "device_ids": ["0", "1"], "capabilities": ["gpu"]}],
        volumes=["/srv/models:/models:ro"],
    )
    b = stack(
        gpus=[{"driver": "nvidia", "device_ids": ["0"], "capabilities": ["gpu"]}],
        volumes=["/srv/models:/models"],
    )
    changes = compare(a, b)
    assert {(c.path, c.change_class) for c in changes} == {
        ("services.vllm.gpus", FUNCTIONAL),
        ("services.vllm.volumes./models", FUNCTIONAL),
    }


# ---------------------------------------------------------------- classification


def test_identity_versus_functional_classification():
    a = stack(
        [MODEL, "--served-model-name", "ds4-a", "--max-num-seqs", "1"],
        container_name="ds4-a",
        ports=["127.0.0.1:39070:8000"],
        labels={"io.composegen.profile": "a", "team": "x"},
    )
    b = stack(
        [MODEL, "--served-model-name", "ds4-b", "--max-num-seqs", "1"],
        container_name="ds4-b",
        ports=["127.0.0.1:39071:8000", "127.0.0.1:39090:9090"],
        labels={"io.composegen.profile": "b", "team": "y"},
    )
    b["name"] = "demo-b"
    classes = {c.path: c.change_class for c in compare(a, b)}
    assert classes == {
        "name": IDENTITY,
        "services.vllm.container_name": IDENTITY,
        "services.vllm.command.--served-model-name": IDENTITY,
        "services.vllm.ports.8000/tcp": IDENTITY,
        "services.vllm.labels.io.composegen.profile": IDENTITY,
        # Publishing another port, or a non-composegen label, changes what runs or how it is found.
        "services.vllm.ports.9090/tcp": FUNCTIONAL,
        "services.vllm.labels.team": FUNCTIONAL,
    }


def test_extra_identity_paths_exact_parent_and_glob():
    a = stack(
        environment={"RUN_ID": "1", "NCCL_DEBUG": "INFO"}, hostname="a", labels={"owner": "x"}
    )
    b = stack(
        environment={"RUN_ID": "2", "NCCL_DEBUG": "WARN"}, hostname="b", labels={"owner": "y"}
    )
    assert {c.change_class for c in compare(a, b)} == {FUNCTIONAL}
    extra = ["services.vllm.hostname", "services.*.labels.own*"]
    classes = {c.path: c.change_class for c in compare(a, b, identity_paths=extra)}
    assert classes == {
        "services.vllm.hostname": IDENTITY,
        "services.vllm.labels.owner": IDENTITY,
        "services.vllm.environment.RUN_ID": FUNCTIONAL,  # environment is never identity
        "services.vllm.environment.NCCL_DEBUG": FUNCTIONAL,
    }


def test_order_is_functional_first_then_by_path_and_services_added_once():
    a = stack(container_name="a", environment={"B": "1", "A": "1"})
    b = stack(container_name="b", environment={"B": "2", "A": "2"})
    b["services"]["sidecar"] = {"image": "busybox", "command": ["sleep", "1d"]}
    changes = compare(a, b)
    assert [c.path for c in changes] == [
        "services.sidecar",
        "services.vllm.environment.A",
        "services.vllm.environment.B",
        "services.vllm.container_name",
    ]
    assert changes[0].before is None and changes[0].after == {
        "image": "busybox",
        "command": ["sleep", "1d"],
    }
    assert compare(a, b) == changes


# ---------------------------------------------------------------- the r33 fixtures and outputs


def test_r33_fixtures_have_exactly_one_functional_change(r33):
    a, b = r33
    changes = compare(a.data, b.data)
    functional = [c.report().to_json() for c in changes if c.change_class == FUNCTIONAL]
    assert functional == [
        {
            "path": "services.vllm.command.--max-num-batched-tokens",
            "class": "functional",
            "before": 8192,
            "after": 4096,
        }
    ]
    assert {c.path for c in changes if c.change_class == IDENTITY} == {
        "name",
        "services.vllm.container_name",
        "services.vllm.command.--served-model-name",
        "services.vllm.ports.8000/tcp",
        "services.vllm.labels.io.composegen.profile",
        "services.vllm.labels.io.composegen.hash",
        "services.vllm.labels.io.composegen.served-model-name",
    }
    assert exit_status(changes, functional_only=False) == 1
    assert exit_status(changes, functional_only=True) == 1
    identity_only = [c for c in changes if c.change_class == IDENTITY]
    assert exit_status(identity_only, functional_only=True) == 0
    # what `diff --json` prints: `class` by its alias
    shown = [c.report().to_json() for c in changes]
    assert shown[0] == {
        "path": changes[0].path,
        "class": "functional",
        "before": 8192,
        "after": 4096,
    }


def test_handwritten_spelling_of_the_same_stack_is_identical(diff_dir: Path, repo_root: Path):
    a = load_side(str(diff_dir / "r33-8192.yaml"), repo_root)
    b = load_side(str(diff_dir / "r33-8192-handwritten.yaml"), repo_root)
    assert a.text != b.text
    assert compare(a.data, b.data) == [] and exit_status([], functional_only=False) == 0
    assert format_text([], a.label, b.label).splitlines()[-1] == "summary: no semantic differences"


def test_format_text_groups_by_class(r33):
    a, b = r33
    lines = format_text(compare(a.data, b.data), "8192", "4096").splitlines()
    assert lines[:2] == ["--- 8192", "+++ 4096"]
    assert lines[2].split() == ["functional", "--max-num-batched-tokens", "8192", "→", "4096"]
    assert any(
        line.split() == ["identity", "ports", "8000/tcp", "127.0.0.1:39070", "→", "127.0.0.1:39071"]
        for line in lines
    )
    assert [line.split()[0] for line in lines[2:-1]] == ["functional"] + ["identity"] * 7
    assert lines[-1] == "summary: 1 functional, 7 identity (8 changes)"


def test_unified_is_a_plain_line_diff(r33):
    a, b = (side.text for side in r33)
    text = unified(a, b, "a.yaml", "b.yaml")
    assert text.startswith("--- a.yaml\n+++ b.yaml\n")
    assert '-      - "8192"\n' in text and '+      - "4096"\n' in text
    assert unified(a, a, "a", "a") == ""
