"""Preflight on the real engine with its checks run concurrently: the sink and the report see them in the
order they had one after the other, a stale out/ still fails first, and with the engine's record in the
cache no probe container runs; a changed engine ID (what a different engine answers) is probed again."""

from __future__ import annotations

import pytest

from composegen.errors import CheckFailed
from composegen.profiles import resolve
from composegen.project import Project
from composegen.stack import engine, enginecache, engineclient, hostprobe, placement, prepare
from composegen.stack.preflight import Check
from composegen.stack.progress import ProgressSink
from tests.support.engine import emulated_project

ORDER = ["engine", "compose", "image", "gpus", "shm", "port", "ulimits", "weights", "memory"]


class Recorder(ProgressSink):
    def __init__(self) -> None:
        self.seen: list[Check] = []

    def check(self, check: Check) -> None:
        self.seen.append(check)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPOSEGEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("COMPOSEGEN_NO_CACHE", raising=False)


@pytest.fixture
def probes(monkeypatch):
    calls = []
    real = hostprobe.engine_rlimits
    monkeypatch.setattr(
        hostprobe, "engine_rlimits", lambda *a, **k: calls.append(a) or real(*a, **k)
    )
    return calls


def _deployment(tmp_path):
    root, name, _ = emulated_project(tmp_path)
    project = Project(root)
    return placement.deployment(project, resolve.load(project, name))


@pytest.mark.docker
def test_checks_arrive_in_their_order_and_the_cache_spares_the_probe(tmp_path, cache, probes):
    dep = _deployment(tmp_path)
    for run in range(2):
        sink = Recorder()
        prep = prepare.prepare(dep, prepare.UpOptions(emulate=True), sink)
        assert [c.name for c in sink.seen] == ORDER, run
        assert prep.checks == sink.seen
        # ulimits: clamped, a warning
        assert all(c.status != "fail" for c in prep.checks), prep.checks
    assert len(probes) == 1  # the second preflight's ulimits came from the engine's record


@pytest.mark.docker
def test_another_engine_id_is_probed_again(tmp_path, cache, probes, monkeypatch):
    dep = _deployment(tmp_path)
    prepare.prepare(dep, prepare.UpOptions(emulate=True), Recorder())
    real = engine.engine_info
    monkeypatch.setattr(
        engine, "engine_info", lambda target=None: {**real(target), "ID": "another-engine"}
    )
    prepare.prepare(dep, prepare.UpOptions(emulate=True), Recorder())
    assert len(probes) == 2
    prepare.prepare(dep, prepare.UpOptions(emulate=True), Recorder())
    assert len(probes) == 2  # and that engine's record answers from then on
    assert len(list((tmp_path / "cache" / enginecache.RLIMITS).glob("*.json"))) == 2


@pytest.mark.docker
def test_a_stale_out_fails_before_any_engine_check_is_reported(tmp_path, cache):
    dep = _deployment(tmp_path)
    out = dep.project.out_path(dep.name)
    out.write_text(out.read_text() + "# edited\n")
    sink = Recorder()
    with pytest.raises(CheckFailed, match="is stale"):
        prepare.prepare(dep, prepare.UpOptions(emulate=True), sink)
    assert sink.seen == []


@pytest.mark.docker
def test_an_engine_answer_is_reused_only_briefly(monkeypatch):
    calls = []
    client = engine.client()
    real = client.info
    monkeypatch.setattr(client, "info", lambda: calls.append(1) or real())
    monkeypatch.setattr(engineclient, "_infos", {})
    assert engine.engine_info()["ID"] == engine.engine_info()["ID"]
    assert len(calls) == 1
    monkeypatch.setattr(engineclient, "INFO_FRESH_S", 0.0)
    engine.engine_info()
    assert len(calls) == 2
