"""`down` finds everything a run created by label, not only what its compose file names: the stack when
out/ no longer has its file, and a probe container an interrupted `up` of the profile left."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.support.cli import run_cli
from tests.support.engine import emulated_project, force_remove, project_leftovers

pytestmark = pytest.mark.docker

BASE_IMAGE = os.environ.get("COMPOSEGEN_BASE_IMAGE", "composegen/base:py3")


def _probes(name: str) -> list[str]:
    res = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label=io.composegen.probe=composegen-{name}"],
        capture_output=True,
        text=True,
    )
    return res.stdout.split()


def test_down_removes_the_stack_without_its_compose_file_and_a_left_probe(tmp_path):
    root, name, _ = emulated_project(tmp_path)
    project = f"composegen-{name}"
    try:
        assert run_cli("--root", str(root), "up", name, "--emulate").returncode == 0
        label = f"io.composegen.probe=composegen-{name}"
        probe = subprocess.run(
            ["docker", "run", "-d", "--label", label, "--entrypoint", "sleep", BASE_IMAGE, "600"],
            capture_output=True,
            text=True,
        )
        assert probe.returncode == 0, probe.stderr
        # e.g. the profile was renamed and re-rendered
        (root / "out" / name / "compose.yaml").unlink()

        res = run_cli("--root", str(root), "down", name)
        assert res.returncode == 0, res.stderr
        assert f"{project}-vllm-1" in res.stdout and f"network {project}_default" in res.stdout
        assert project_leftovers(project) == [] and _probes(name) == []
    finally:
        force_remove(project)
        for cid in _probes(name):
            subprocess.run(["docker", "rm", "-f", cid], capture_output=True)
