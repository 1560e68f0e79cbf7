"""The diff must-holds on the shipped profiles, through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from composegen import errors
from composegen.diff import semantic as diff
from composegen.profiles import caches, resolve
from composegen.project import Project
from tests.support.cli import run_cli
from tests.support.helpers import REPO


def _changes(a: str, b: str, *extra: str) -> tuple[int, list[dict]]:
    res = run_cli("diff", a, b, "--json", *extra)
    return res.returncode, json.loads(res.stdout)


def test_ab_arms_differ_functionally_only_in_the_batch_ceiling():
    rc, changes = _changes("8192-131k", "4096-131k")
    functional = [c for c in changes if c["class"] == "functional"]
    assert rc == 1
    # the batch ceiling, and with it the compile cache's key (vLLM's compile range ends there)
    keys = [resolve.load(Project(REPO), n) for n in ("8192-131k", "4096-131k")]
    assert functional == [
        {
            "path": "services.vllm.command.--max-num-batched-tokens",
            "class": "functional",
            "before": 8192,
            "after": 4096,
        },
        {
            "path": "volumes.composegen-cache.name",
            "class": "functional",
            "before": caches.volume(keys[0]),
            "after": caches.volume(keys[1]),
        },
    ]
    assert keys[0].name not in str(functional)  # the key is not the profile's name
    identity = {c["path"] for c in changes if c["class"] == "identity"}
    assert {
        "name",
        "services.vllm.container_name",
        "services.vllm.ports.8000/tcp",
        "services.vllm.command.--served-model-name",
    } <= identity


def test_r33_to_control_removes_speculation_and_sequences():
    _, changes = _changes("r33", "8192-131k")
    functional = {
        c["path"]: (c["before"], c["after"]) for c in changes if c["class"] == "functional"
    }
    assert functional["services.vllm.command.--max-num-seqs"] == (16, 1)
    assert functional["services.vllm.command.--speculative-config"] == (
        {"method": "dspark", "num_speculative_tokens": 5},
        None,
    )


def test_functional_only_exit_status_and_identical_stacks():
    assert run_cli("diff", "--functional-only", "4096-131k", "4096-131k").returncode == 0
    assert run_cli("diff", "--functional-only", "8192-131k", "4096-131k").returncode == 1
    assert run_cli("diff", "out/4096-131k/compose.yaml", "4096-131k").returncode == 0


def test_unified_and_bad_input():
    res = run_cli("diff", "--unified", "8192-131k", "4096-131k")
    assert '-      - "--max-num-batched-tokens=8192"' in res.stdout
    bad = run_cli("diff", "nope-profile", "4096-131k")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_unknown_profile_is_bad_input(tmp_path: Path):
    (tmp_path / "profiles").mkdir()
    with pytest.raises(errors.BadInput, match="no such profile 'r33'"):
        diff.load_side("r33", tmp_path)


def test_one_node_of_a_multi_node_profile(repo_root: Path):
    side = diff.load_side("dspark-2x/spark-2", repo_root)
    assert side.label == "profile:dspark-2x/spark-2"
    assert "--headless" in side.data["services"]["vllm"]["command"]
