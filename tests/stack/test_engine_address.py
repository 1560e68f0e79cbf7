"""The engine composegen talks to is the one `docker` would use: DOCKER_HOST, else DOCKER_CONTEXT, else the
config's current context; and an engine it cannot reach is named with where that address came from."""

from __future__ import annotations

import subprocess

import pytest

from tests.support.cli import run_cli

pytestmark = pytest.mark.docker


def _context(config, name: str, host: str) -> None:
    made = subprocess.run(
        ["docker", "--config", str(config), "context", "create", name, "--docker", f"host={host}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr


def test_a_context_is_followed_and_an_unreachable_one_is_named(tmp_path):
    config = tmp_path / "docker-config"
    config.mkdir()
    _context(config, "gone", "unix:///nonexistent-cg.sock")
    env = {"DOCKER_CONFIG": str(config), "DOCKER_HOST": "", "DOCKER_CONTEXT": "gone"}
    res = run_cli("status", env=env)
    assert res.returncode == 3, res.stderr
    assert (
        "Docker engine at unix:///nonexistent-cg.sock (context gone, from DOCKER_CONTEXT) unreachable"
        in res.stderr
    )
    # `docker context use` (the config's currentContext) counts as much as the variable.
    (config / "config.json").write_text('{"currentContext": "gone"}')
    res = run_cli("status", env={**env, "DOCKER_CONTEXT": ""})
    assert res.returncode == 3 and "(context gone, from docker context use)" in res.stderr, (
        res.stderr
    )
    # A context that reaches the caller's engine works like it.
    here = subprocess.run(
        ["docker", "context", "inspect", "--format", "{{.Endpoints.docker.Host}}"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    _context(config, "here", here)
    res = run_cli("status", env={**env, "DOCKER_CONTEXT": "here"})
    assert res.returncode == 0, res.stderr
