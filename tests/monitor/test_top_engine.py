"""`composegen top NAME` on a stack started by `up --emulate` on the real engine: while a load runs, the sample
shows requests running (and the rest waiting behind --max-num-seqs 1); after it, none."""

from __future__ import annotations

import json

import pytest

from tests.support.cli import run_cli
from tests.support.engine import (
    HELD_DECODE,
    emulated_project,
    force_remove,
    project_leftovers,
    top_under_load,
)

pytestmark = pytest.mark.docker


def test_top_shows_requests_running_while_a_load_runs(tmp_path):
    root, name, port = emulated_project(tmp_path, load=0.2, env=HELD_DECODE)
    project = f"composegen-{name}"
    try:
        up = run_cli("--root", str(root), "up", name, "--emulate", timeout=600)
        assert up.returncode == 0, up.stderr
        res = top_under_load(root, name, port, clients=4)
        assert res.returncode == 0, res.stderr
        sample = json.loads(res.stdout)
        assert sample["name"] == name and sample["url"] == f"http://127.0.0.1:{port}"
        assert sample["running"] == 1 and sample["waiting"] >= 1  # the profile's max-num-seqs is 1
        assert sample["kv_cache_usage"] > 0
        assert sample["emulated"] is True  # `up --emulate`: the container's label says so
        plain = run_cli("--root", str(root), "top", name, "--once", "--interval", "0.2").stdout
        assert plain.splitlines()[0].endswith(" · EMULATED vLLM"), plain
        idle = json.loads(
            run_cli(
                "--root", str(root), "top", name, "--once", "--json", "--interval", "0.2"
            ).stdout
        )
        assert idle["running"] == 0 and idle["waiting"] == 0
        assert run_cli("--root", str(root), "down", name).returncode == 0
        stopped = run_cli("--root", str(root), "top", name, "--once")
        assert stopped.returncode == 3 and "is not running" in stopped.stderr
    finally:
        force_remove(project)
    assert project_leftovers(project) == []
