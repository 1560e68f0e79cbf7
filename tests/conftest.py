"""Shared fixtures. Tests marked `docker` need a real engine: skipped locally when none answers,
but with CI=true a missing engine is a failure, never a skip."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"


def _engine_problem() -> str | None:
    if not shutil.which("docker"):
        return "no docker client on PATH"
    for argv in (["docker", "info", "--format", "{{.ServerVersion}}"], ["docker", "compose", "version"]):
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"{' '.join(argv)}: {exc}"
        if proc.returncode != 0:
            return f"{' '.join(argv)}: {proc.stderr.strip()[:200]}"
    return None


def pytest_collection_modifyitems(config, items):
    if not any("docker" in item.keywords for item in items):
        return
    problem = _engine_problem()
    if problem is None:
        return
    if os.environ.get("CI") == "true":
        # Fail, never skip: a CI run that silently skipped the engine tests proves nothing.
        for item in items:
            if "docker" in item.keywords:
                item.add_marker(pytest.mark.usefixtures("_require_engine"))
        return
    skip = pytest.mark.skip(reason=f"docker engine unavailable: {problem}")
    for item in items:
        if "docker" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def _require_engine():
    problem = _engine_problem()
    if problem:
        pytest.fail(f"CI=true and the docker engine is unavailable: {problem}")


@pytest.fixture
def repo_root() -> Path:
    return REPO


@pytest.fixture
def data_dir() -> Path:
    return DATA
