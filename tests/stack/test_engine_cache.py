"""The default engine is what DOCKER_HOST names at the call: a process that answered `docker info`
from the local engine, then was pointed elsewhere (tests call main() in-process), asks the new address
— CI saw `doctor` say "ok engine … at DOCKER_HOST=tcp://…@127.0.0.9:1" from the cached answer."""

from __future__ import annotations

import pytest

from tests.support.cli import run_inproc

pytestmark = pytest.mark.docker


def test_a_changed_docker_host_is_asked_not_the_engine_cached_before(monkeypatch):
    first = run_inproc("doctor")
    assert "ok    engine" in first.stdout, first.stdout + first.stderr
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.9:1")
    monkeypatch.delenv("DOCKER_CONTEXT", raising=False)
    moved = run_inproc("doctor")
    assert moved.returncode == 3, moved.stdout + moved.stderr
    assert "127.0.0.9:1" in moved.stdout + moved.stderr
    assert "ok    engine" not in moved.stdout
