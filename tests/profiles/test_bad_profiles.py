"""Bad input: one line naming file:line and the field, exit 2, no traceback, nothing written."""

from __future__ import annotations

import pytest

from tests.support.cli import assert_bad_input, run_cli, run_inproc
from tests.support.helpers import MINIMAL, make_project

# MINIMAL's lines: 1 image, 2 model, 3 id, 4 revision, 5 served_name, 6 service, 7 port, 8 gpus, 9 shm_size,
# 10 vllm, 11 max-model-len, 12 batched, 13 seqs
BASE = MINIMAL

CASES = [
    (
        "bad-yaml",
        BASE.replace("  max-num-seqs: 4", "  max-num-seqs: [4"),
        "bad.yaml:14: invalid YAML",
    ),
    ("tabs", BASE + "\tfoo: 1\n", "bad.yaml:14: invalid YAML"),
    ("not-a-map", "- just\n- a list\n", "bad.yaml:1: a profile must be a YAML map"),
    (
        "word-int",
        BASE.replace("max-num-batched-tokens: 2048", "max-num-batched-tokens: lots"),
        "bad.yaml:12: vllm.max-num-batched-tokens: must be an integer or a size like 4k / 4K, got 'lots'",
    ),
    (
        "yes-int",
        BASE.replace("max-num-seqs: 4", "max-num-seqs: yes"),
        "bad.yaml:13: vllm.max-num-seqs: must be an integer, got true (a YAML boolean)",
    ),
    (
        "float-int",
        BASE.replace("max-num-batched-tokens: 2048", "max-num-batched-tokens: 4096.5"),
        "bad.yaml:12: vllm.max-num-batched-tokens: must be an integer or a size",
    ),
    (
        "unknown-flag",
        BASE + "  max-num-batched-token: 4096\n",
        "bad.yaml:14: vllm.max-num-batched-token: unknown flag 'max-num-batched-token' for vLLM 0.33.0 (did"
        " you mean 'max-num-batched-tokens'?)",
    ),
    (
        "underscore-flag",
        BASE + "  max_num_seqs: 4\n",
        "bad.yaml:14: vllm.max_num_seqs: unknown flag 'max_num_seqs'; the catalog spells it 'max-num-seqs'",
    ),
    (
        "negative-spelling",
        BASE + "  disable-chunked-prefill: true\n",
        "write 'enable-chunked-prefill: false'",
    ),
    (
        "bad-choice",
        BASE + "  kv-cache-dtype: fp9\n",
        "bad.yaml:14: vllm.kv-cache-dtype: must be one of",
    ),
    (
        "bool-flag-value",
        BASE + "  enable-prefix-caching: 1\n",
        "bad.yaml:14: vllm.enable-prefix-caching: must be true or false",
    ),
    (
        "json-flag-scalar",
        BASE + "  speculative-config: dspark\n",
        "bad.yaml:14: vllm.speculative-config: must be a YAML map",
    ),
    (
        "managed-flag",
        BASE + "  served-model-name: other\n",
        "bad.yaml:14: vllm.served-model-name: set by composegen from model.served_name",
    ),
    (
        "unknown-key",
        BASE.replace("model:", "modle: {}\nmodel:"),
        "bad.yaml:2: modle: unknown key (did you mean 'model'?)",
    ),
    (
        "unknown-nested-key",
        BASE.replace("  served_name: tiny", "  served_name: tiny\n  servedname: x"),
        "bad.yaml:6: model.servedname: unknown key (did you mean 'served_name'?)",
    ),
    (
        "missing-key",
        BASE.replace("  served_name: tiny\n", ""),
        "model.served_name: required key is missing",
    ),
    (
        "bad-digest",
        BASE.replace("sha256:" + "a" * 64, "sha256:abc"),
        "bad.yaml:1: image: 'example/vllm@sha256:abc' is not pinned: the digest must be sha256:<64 lowercase hex>",
    ),
    (
        "unpinned-tag",
        BASE.replace("example/vllm@sha256:" + "a" * 64, "example/vllm:latest"),
        "image: 'example/vllm:latest' is not pinned; use repo@sha256:<64 hex>, or state image_unpinned_reason",
    ),
    (
        "bad-revision",
        BASE.replace("b" * 40, "main"),
        "bad.yaml:4: model.revision: String should match pattern",
    ),
    (
        "port-range",
        BASE.replace("host: 39999", "host: 70000"),
        "bad.yaml:7: service.port.host: Input should be less than or equal to 65535",
    ),
    (
        "port-string",
        BASE.replace("host: 39999", "host: '8000'"),
        "service.port.host: Input should be a valid integer",
    ),
    (
        "secret-value",
        BASE.replace("  shm_size: 4gb", "  shm_size: 4gb\n  environment: {HF_TOKEN: hf_abc123}"),
        "service.environment: HF_TOKEN: secrets must be a ${VAR} reference",
    ),
    (
        "secret-default",
        BASE.replace(
            "  shm_size: 4gb",
            "  shm_size: 4gb\n  environment: {VLLM_API_KEY: '${VLLM_API_KEY:-hunter2}'}",
        ),
        "service.environment: VLLM_API_KEY: secrets must be a ${VAR} reference",
    ),
    (
        "api-key-flag",
        BASE + "  api-key: hunter2\n",
        "bad.yaml:14: vllm.api-key: set by composegen from service.environment",
    ),
    (
        "bind-not-ip",
        BASE.replace("host: 39999", "host: 39999, bind: not an ip"),
        "service.port.bind: must be an IP address",
    ),
    (
        "volume-colon",
        BASE.replace(
            "  shm_size: 4gb", "  shm_size: 4gb\n  volumes: [{source: 'a:b', target: /x}]"
        ),
        "a volume source cannot contain ':'",
    ),
    (
        "gpu-both",
        BASE.replace("gpus: {count: 1}", "gpus: {count: 1, device_ids: ['0']}"),
        "bad.yaml:8: service.gpus: give exactly one of count or device_ids",
    ),
    (
        "util-range",
        BASE + "  gpu-memory-utilization: 1.2\n",
        "bad.yaml:14: vllm.gpu-memory-utilization: must be in (0, 1], got 1.2",
    ),
    (
        "batch-below-seqs",
        BASE.replace("max-num-seqs: 4", "max-num-seqs: 4096"),
        "bad.yaml:12: vllm.max-num-batched-tokens: 2048 is below max-num-seqs 4096",
    ),
    (
        "len-over-batch-no-chunk",
        BASE + "  enable-chunked-prefill: false\n",
        "bad.yaml:11: vllm.max-model-len: 4096 exceeds max-num-batched-tokens 2048 while"
        " enable-chunked-prefill is false",
    ),
    (
        "tp-vs-gpus",
        BASE + "  tensor-parallel-size: 2\n",
        "bad.yaml:8: service.gpus: reserves 1 GPU(s) but tensor-parallel-size × pipeline-parallel-size = 2 × 1 = 2",
    ),
    (
        "dcp-divides",
        BASE.replace("gpus: {count: 1}", "gpus: {count: 4}")
        + "  tensor-parallel-size: 4\n  decode-context-parallel-size: 3\n",
        "bad.yaml:15: vllm.decode-context-parallel-size: 3 does not divide tensor-parallel-size 4",
    ),
    (
        "offload-shm",
        BASE + "  kv-offloading-size: 16\n",
        "bad.yaml:9: service.shm_size: 4gb cannot hold kv-offloading-size 16 GiB",
    ),
    (
        "private-ipc-no-shm",
        BASE.replace("  shm_size: 4gb\n", ""),
        "service.ipc: private IPC gets Docker's 64 MB /dev/shm",
    ),
    ("merge-key", BASE + "x: &a {b: 1}\ny:\n  <<: *a\n", "YAML merge keys (<<) are not supported"),
    (
        "duplicate-key",
        BASE + "  max-num-seqs: 8\n",
        "bad.yaml:14: vllm.max-num-seqs: duplicate key",
    ),
    ("extends-missing", "extends: nothere\n" + BASE, "bad.yaml:1: extends: no profile 'nothere'"),
    ("extends-type", "extends: [a]\n" + BASE, "bad.yaml:1: extends: must be a profile name"),
    (
        "bad-duration",
        BASE.replace("  shm_size: 4gb", "  shm_size: 4gb\n  stop_grace_period: soon"),
        "bad.yaml:10: service.stop_grace_period: String should match pattern",
    ),
    (
        "alias",
        BASE + "x: &a [1]\ny: [*a]\n",
        "bad.yaml:14: y.0: YAML aliases (*name) are not supported; use extends:",
    ),
    ("capital-key", BASE + "Foo: 1\n", "bad.yaml:14: Foo: unknown key"),
    (
        "bracket-key",
        BASE.replace("vllm:", "v[llm:"),
        "bad.yaml:10: v[llm: unknown key (did you mean 'vllm'?)",
    ),
    ("python-tag", BASE + "  max-num-seqs2: !!python/object:os.system x\n", "is not allowed"),
]


@pytest.mark.parametrize("case,text,expected", CASES, ids=[c[0] for c in CASES])
def test_bad_profile_is_one_clear_line_exit_2_and_writes_nothing(tmp_path, case, text, expected):
    root = make_project(tmp_path, {"bad": text})
    for command in (["validate"], ["render"], ["show", "bad"]):
        assert_bad_input(run_inproc("--root", str(root), *command), expected)
    assert not (root / "out").exists()


# A few cases through a real process: the console script's exit status and stderr, and nothing written.
@pytest.mark.parametrize("case", ["bad-yaml", "secret-value", "tp-vs-gpus"])
def test_bad_profile_in_a_real_process(tmp_path, case):
    text, expected = next((t, e) for c, t, e in CASES if c == case)
    root = make_project(tmp_path, {"bad": text})
    res = run_cli("--root", str(root), "render")
    assert res.returncode == 2 and expected in res.stderr and "Traceback" not in res.stderr, (
        res.stderr
    )
    assert len(res.stderr.strip().splitlines()) <= 2
    assert not (root / "out").exists()


def test_extends_cycle_is_named(tmp_path):
    root = make_project(tmp_path, {"a": "extends: b\n" + MINIMAL, "b": "extends: a\n"})
    res = run_cli("--root", str(root), "validate", "a")
    assert res.returncode == 2
    assert "extends: cycle a -> b -> a" in res.stderr


def test_one_bad_profile_writes_nothing_for_the_good_ones(tmp_path):
    root = make_project(
        tmp_path, {"good": MINIMAL, "zbad": MINIMAL.replace("max-num-seqs: 4", "max-num-seqs: yes")}
    )
    res = run_cli("--root", str(root), "render")
    assert res.returncode == 2
    assert not (root / "out").exists()


def test_unknown_profile_name_suggests(tmp_path):
    root = make_project(tmp_path, {"4096-131k": MINIMAL})
    res = run_cli("--root", str(root), "show", "4096-131")
    assert res.returncode == 2 and "did you mean '4096-131k'?" in res.stderr
