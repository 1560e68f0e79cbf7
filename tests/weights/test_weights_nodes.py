"""Weights on two real engines (the main one and a second dockerd): every node's cache is checked, the
worker's through its own engine; `weights --sync` copies the head's snapshot to the worker through the Docker
API and the sizes then match. The head's copy comes from the local Hub stand-in (`--download`)."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest

from composegen.profiles import resolve
from composegen.project import find_project
from composegen.stack import nodecache, placement
from tests.support.engine import free_port, tiny_profile
from tests.support.helpers import make_project, run_cli
from tests.support.hub import Hub, tiny_model
from tests.support.second_engine import (  # noqa: F401 - the session fixture
    BASE_IMAGE,
    second_engine,
)

pytestmark = pytest.mark.docker

REST = """\
vllm:
  tensor-parallel-size: 2
  distributed-executor-backend: mp
  max-model-len: 8192
nodes:
  master_addr: 127.0.0.1
  master_port: {master}
  members:
    - {{name: n0, rank: 0, hf_cache: "{head}"}}
    - {{name: n1, rank: 1, docker_host: "{worker_url}", hf_cache: "{worker}"}}
"""


def test_every_node_is_checked_and_sync_copies_the_snapshot(tmp_path, second_engine):  # noqa: F811
    hub = Hub().start()
    try:
        files = tiny_model(shards=2, shard_bytes=3 * 2**20)
        repo = hub.add_repo("org/tiny-model", files)
        head, worker = tmp_path / "head-hf", tmp_path / "worker-hf"
        name = f"wn-{uuid.uuid4().hex[:8]}"
        rest = REST.format(
            master=free_port(), head=head, worker=worker, worker_url=second_engine.url
        )
        text = tiny_profile(f"{name}-served", f"{{host: {free_port()}}}", rest=rest).replace(
            "d" * 40, repo.sha
        )
        root = make_project(tmp_path / "proj", {name: text})
        env = {"HF_ENDPOINT": hub.url, "HF_HUB_DISABLE_PROGRESS_BARS": "1"}

        def weights(*args: str):
            return run_cli("--root", str(root), "weights", name, *args, env=env, timeout=300)

        res = weights("--download", "--json")
        assert res.returncode == 1, res.stderr  # the head is complete now; the worker is not
        report = json.loads(res.stdout)
        assert report["complete"] is True and report["cache_dir"] == str(head / "hub")
        [node] = report["nodes"]
        assert (
            node["name"] == "n1"
            and node["engine"] == second_engine.url
            and node["complete"] is False
        )
        assert "config.json" in node["missing"] and "node n1 lacks" in res.stderr

        project = find_project(root)
        r = resolve.load(project, name)
        checks, complete = nodecache.preflight_checks(
            placement.deployment(project, r), BASE_IMAGE, emulate=False, allow_download=False
        )
        assert [(c.name, c.status) for c in checks] == [
            ("n0/weights", "ok"),
            ("n1/weights", "fail"),
        ] and not complete

        res = weights("--sync", "--json")
        assert res.returncode == 0, res.stderr
        report = json.loads(res.stdout)
        assert report["synced"] == ["n1"] and report["nodes"][0]["complete"] is True
        assert report["nodes"][0]["total_bytes"] == report["total_bytes"]
        snap = worker / "hub" / "models--org--tiny-model" / "snapshots" / repo.sha
        shard = "model-00001-of-00002.safetensors"
        # links into blobs/
        assert os.path.islink(snap / shard) and (snap / shard).read_bytes() == files[shard]
        assert Path(os.path.realpath(snap / shard)).parent.name == "blobs"
        checks, complete = nodecache.preflight_checks(
            placement.deployment(project, r), BASE_IMAGE, emulate=False, allow_download=False
        )
        assert [c.status for c in checks] == ["ok", "ok"] and complete  # `up` would now run offline

        (snap / shard).resolve().write_bytes(b"short")  # a truncated copy on the worker: sizes tell
        res = weights("--json")
        assert res.returncode == 1
        assert json.loads(res.stdout)["nodes"][0]["missing"] == [
            f"{shard} (size differs from the head's)"
        ]
    finally:
        hub.close()
