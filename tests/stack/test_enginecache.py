"""The engine facts cache: the rlimit ceiling is probed once per engine (a real probe container on the
real engine), believed until the engine changes, the TTL runs out or a refusal drops it; a damaged record
is never believed; the compose version is asked once per CLI and plugin binary."""

from __future__ import annotations

import json
import os

import pytest

from composegen import usercache
from composegen.stack import compose, enginecache, hostprobe

BASE = os.environ.get("COMPOSEGEN_BASE_IMAGE", "composegen/base:py3")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPOSEGEN_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("COMPOSEGEN_NO_CACHE", raising=False)
    return tmp_path


@pytest.fixture
def probes(monkeypatch):
    """Counts the real probe containers run for the rlimit ceiling."""
    calls = []
    real = hostprobe.engine_rlimits

    def counted(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(hostprobe, "engine_rlimits", counted)
    return calls


@pytest.mark.docker
def test_the_ceiling_is_probed_once_per_engine(cache, probes):
    first = enginecache.rlimits(BASE, "cache-test")
    second = enginecache.rlimits(BASE, "cache-test")
    assert first == second and set(first) == {"memlock", "nofile", "stack"}
    assert len(probes) == 1
    enginecache.forget_rlimits()  # what up.py does when the engine refused a rlimit
    assert enginecache.rlimits(BASE, "cache-test") == first
    assert len(probes) == 2


@pytest.mark.docker
@pytest.mark.parametrize(
    "damage",
    [
        "expired",
        "from the future",
        "not a number",
        "a bool",
        "not a dict",
        "garbage file",
        "disabled",
    ],
)
def test_a_stale_or_damaged_record_is_probed_again(cache, probes, monkeypatch, damage):
    enginecache.rlimits(BASE, "cache-test")
    [path] = (cache / enginecache.RLIMITS).glob("*.json")
    record = json.loads(path.read_text())
    if damage == "expired":
        record["at"] -= enginecache.TTL_S + 1
    elif damage == "from the future":
        record["at"] += 3600
    elif damage == "not a number":
        record["rlimits"]["nofile"] = "20000"
    elif damage == "a bool":
        record["rlimits"]["nofile"] = True
    elif damage == "not a dict":
        record["rlimits"] = [1, 2]
    elif damage == "disabled":
        monkeypatch.setenv("COMPOSEGEN_NO_CACHE", "1")
    path.write_text("{not json" if damage == "garbage file" else json.dumps(record))
    assert enginecache.rlimits(BASE, "cache-test")["nofile"] > 0
    assert len(probes) == 2


def test_an_engine_is_known_by_what_a_reconfiguration_changes():
    info = {
        "ID": "abc",
        "ServerVersion": "20.10.24",
        "KernelVersion": "6.1",
        "Runtimes": {"runc": {}},
    }
    key = enginecache.engine_key(info)
    # state, not config
    assert enginecache.engine_key({**info, "Containers": 7, "SystemTime": "now"}) == key
    for changed in (
        {"ID": "other"},
        {"ServerVersion": "28.2"},
        {"Runtimes": {"runc": {}, "nvidia": {}}},
    ):
        assert enginecache.engine_key({**info, **changed}) != key


@pytest.mark.docker
def test_the_compose_version_is_asked_once_per_binary(cache, monkeypatch):
    calls = []
    real = compose.compose_version
    monkeypatch.setattr(compose, "compose_version", lambda: calls.append(1) or real())
    if len(enginecache._compose_binaries()) != 2:
        pytest.fail("docker CLI or its compose plugin not found where the docker CLI looks")
    assert enginecache.compose_version() == enginecache.compose_version() == real()
    assert len(calls) == 1
    [path] = (cache / enginecache.COMPOSE).glob("*.json")
    assert json.loads(path.read_text())["version"] == usercache.RECORD_VERSION
