"""Multi-node `up` offers the head's filled cache volume to a worker whose engine has none, through
`cache export` on the head's engine and `cache import` on the worker's: the import's refusals are
asked of the WORKER's engine (its image ID, its GPUs), and a refusal starts the worker cold with the
reason said, never a volume made (docs/caches.md). The copy itself: tests/stack/test_multinode_engine.py."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile

import pytest

from composegen.errors import EngineError
from composegen.profiles import caches
from composegen.profiles import resolve as profile
from composegen.project import Project
from composegen.stack import caches as kept
from composegen.stack import engine, engineclient
from composegen.stack.placement import deployment
from composegen.stack.preflight import Check
from tests.support.engine import tiny_profile
from tests.support.helpers import make_project

WORKER = "unix:///nonexistent/composegen-worker.sock"
NODES = f"""\
vllm: {{tensor-parallel-size: 3, distributed-executor-backend: mp}}
nodes:
  master_addr: 127.0.0.1
  members:
    - {{name: n0, rank: 0}}
    - {{name: n1, rank: 1, docker_host: "{WORKER}"}}
    - {{name: n2, rank: 2, docker_host: "{WORKER}2"}}
"""
H100 = "NVIDIA H100 80GB HBM3, 580.159.04"
FILLED_BY = "sha256:" + "a" * 64


def _dep(tmp_path, caches_line: str = ""):
    root = make_project(tmp_path, {"mn": tiny_profile("mn-served", "{host: 8000}") + NODES})
    if caches_line:
        (root / "profiles" / "mn.yaml").write_text(
            (root / "profiles" / "mn.yaml").read_text() + caches_line
        )
    project = Project(root)
    return deployment(project, profile.load(project, "mn"))


def _filled_head(monkeypatch, dep) -> list[str]:
    """The head's volume filled by a recorded real start (image FILLED_BY, an H100); the worker's
    engine has none. Export writes what `cache export` would; what the import made is listed."""
    key = caches.key(dep.r)
    record = {"key": key, "uses": {"mn": "2026-12-06T10:00:00Z"}, "image_id": FILLED_BY}
    kept._path(dep.project, key, False).write_text(json.dumps(record | {"gpus": [H100]}))
    monkeypatch.setattr(engineclient, "volume_present", lambda name, on=None: on == dep.head.target)
    monkeypatch.setattr(engineclient, "volumes", lambda prefix, on=None: [])

    def export(project, key_, file, at):
        assert (key_, at[0], at[1]) == (key, dep.head, "emu:img")
        data = b"kernel"
        doc = record | {"gpus": [H100], "files": {"triton/k": hashlib.sha256(data).hexdigest()}}
        with tarfile.open(file, "w") as tar:
            for name, blob in (("triton/k", data), ("composegen-cache.json", json.dumps(doc))):
                info = tarfile.TarInfo(name)
                info.size = len(blob)
                tar.addfile(info, io.BytesIO(blob if isinstance(blob, bytes) else blob.encode()))

    made: list[str] = []
    monkeypatch.setattr(kept, "cache_export", lambda *args: made.append("export") or export(*args))
    monkeypatch.setattr(
        engineclient, "create_volume", lambda name, labels, on=None: made.append(name)
    )
    return made


@pytest.mark.parametrize(
    ("image_now", "gpus_now", "said"),
    [
        ("sha256:" + "b" * 64, H100, "example/vllm@sha256:ccc"),
        (
            FILLED_BY,
            "NVIDIA H200, 580.159.04",
            "the GPUs are NVIDIA H200, 580.159.04; it was filled on",
        ),
    ],
)
def test_a_worker_whose_image_or_gpus_differ_starts_cold_and_says_why(
    tmp_path, monkeypatch, image_now, gpus_now, said
):
    dep = _dep(tmp_path)
    made = _filled_head(monkeypatch, dep)
    workers = {n.target for n in dep.nodes[1:]}
    asked = []

    def image_id(ref, target=None):
        asked.append(target)
        return image_now if target in workers else FILLED_BY

    def gpu_check(emulate, on=None):
        asked.append(on)
        return Check("gpus", "ok", "nvidia runtime")

    monkeypatch.setattr(engine, "image_id", image_id)
    monkeypatch.setattr(kept, "gpu_check", gpu_check)
    monkeypatch.setattr(engine, "run_probe", lambda image, argv, owner, on=None, **host: gpus_now)
    checks = kept.offer_nodes(dep, False, "emu:img")
    assert [(c.name, c.status) for c in checks] == [("n1/cache", "warn"), ("n2/cache", "warn")]
    assert checks[0].message.startswith("node n1 starts cold: ") and said in checks[0].message
    assert checks[1].message.endswith("; refused") and set(asked) == workers
    assert made == ["export"]  # once for every worker, no volume made


def test_nothing_offered_without_a_filled_head_or_with_caches_off(tmp_path, monkeypatch):
    def never(*args, **kwargs):
        raise EngineError("no engine was to be asked")

    monkeypatch.setattr(kept, "cache_export", never)
    dep = _dep(tmp_path / "empty")
    monkeypatch.setattr(engineclient, "volume_present", lambda name, on=None: True)
    assert kept.offer_nodes(dep, True, "emu:img") == []  # no start recorded filling it
    off = _dep(tmp_path / "off", "caches: off\n")
    _filled_head(monkeypatch, off)
    monkeypatch.setattr(kept, "cache_export", never)
    assert kept.offer_nodes(off, False, "emu:img") == []
