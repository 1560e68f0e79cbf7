"""Numbers and rules: NaN, infinities and huge integers are bad input wherever they are written, and what
`docker compose config` would refuse is refused at validate time (one line, exit 2, nothing written)."""

from __future__ import annotations

import pytest

from tests.support.cli import assert_bad_input, run_inproc
from tests.support.profiles import edited, project

HUGE = 10**5000  # more digits than Python parses by default
BIG = 2**64


@pytest.mark.parametrize(
    "text_edit,problem",
    [
        ("  kv-offloading-size: .nan\n", "vllm.kv-offloading-size: nan is not a number"),
        ("  kv-offloading-size: .inf\n", "vllm.kv-offloading-size: inf is not a number"),
        ("  gpu-memory-utilization: -.inf\n", "vllm.gpu-memory-utilization: -inf"),
        ("  max-num-seqs2: 1e400\n", None),  # a YAML float that overflows to inf
        ("  seed: " + "9" * 5000 + "\n", "vllm.seed"),
        ("  seed: " + str(BIG) + "\n", "out of range"),
        ("  speculative-config: '{\"x\": NaN}'\n", "vllm.speculative-config: NaN"),
        ('  speculative-config: \'{"x": ' + "9" * 5000 + "}'\n", "vllm.speculative-config"),
        ("  speculative-config: {x: .inf}\n", "vllm.speculative-config.x: inf"),
        ("  max-num-batched-tokens: 99999999999999999999999K\n", "vllm.max-num-batched-tokens"),
    ],
)
def test_non_finite_and_huge_numbers_are_bad_input(tmp_path, text_edit, problem):
    from tests.support.helpers import MINIMAL

    text = (
        MINIMAL.replace("  max-num-batched-tokens: 2048\n", "")
        if "batched" in text_edit
        else MINIMAL
    )
    root = project(tmp_path, text + text_edit)
    for command in ("validate", "render"):
        assert_bad_input(run_inproc("--root", str(root), command), problem)
    assert not (root / "out").exists()


@pytest.mark.parametrize(
    "keys,value,problem",
    [
        (("service", "shm_size"), "1b", "service.shm_size: 1b is below 1 GiB"),
        (("service", "shm_size"), "512mb", "service.shm_size: 512mb is below 1 GiB"),
        (("service", "shm_size"), "99999999999999999999tb", "service.shm_size"),
        (("service", "gpus"), {"device_ids": ["0", "0"]}, "device_ids must be unique"),
        (("service", "gpus"), {"device_ids": []}, "service.gpus.device_ids"),
        (("service", "gpus"), {"device_ids": ["0 1"]}, "service.gpus.device_ids.0"),
        (("service", "gpus"), {"count": 100000}, "service.gpus.count"),
        (("service", "ulimits"), {"nofile": BIG}, "out of range"),
        (("service", "ulimits"), {"nofile": -2}, "service.ulimits.nofile"),
        (("service", "ulimits"), {"nofile": {"soft": 10, "hard": 5}}, "soft 10 exceeds hard 5"),
        (("service", "stop_grace_period"), "99999999h", "longer than 24 hours"),
        (("service", "stop_grace_period"), "1" * 40 + "s", "service.stop_grace_period"),
        (("service", "startup_timeout"), BIG, "out of range"),
        (("vllm_version",), "../../../etc/passwd", "vllm_version"),
        (("service", "port", "bind"), "fe80::1%eth0", "scoped address"),
    ],
)
def test_what_compose_or_the_engine_would_refuse_is_refused_at_validate(
    tmp_path, keys, value, problem
):
    root = project(tmp_path, edited((keys, value)))
    for command in ("validate", "render"):
        assert_bad_input(run_inproc("--root", str(root), command), problem)
    assert not (root / "out").exists()


def test_ipc_host_needs_no_private_shm_minimum(tmp_path):
    root = project(
        tmp_path, edited((("service", "ipc"), "host"), (("service", "shm_size"), "64mb"))
    )
    assert run_inproc("--root", str(root), "render").returncode == 0


def test_a_node_hf_cache_is_a_host_path_not_an_undeclared_volume(tmp_path):
    members = [{"name": "n0", "rank": 0}, {"name": "n1", "rank": 1, "hf_cache": "named_vol"}]
    doc = edited(
        (("nodes",), {"master_addr": "10.0.0.1", "members": members}),
        (("vllm", "tensor-parallel-size"), 2),
    )
    root = project(tmp_path, doc)
    assert_bad_input(
        run_inproc("--root", str(root), "render"), "nodes.members.1.hf_cache: must be a host path"
    )
