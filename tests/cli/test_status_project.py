"""`composegen status` shows this project's stacks (issue 51 #3): a stack another project started on the
same engine is listed only with `--all`, and `--json` names the project. Which project a container
belongs to is compose's own label: the compose file it was started from
(com.docker.compose.project.config_files) lies under the project's root."""

from __future__ import annotations

import json
import subprocess
import uuid

import pytest

from tests.support.cli import run_cli
from tests.support.engine import force_remove


def _stack(root, name: str) -> str:
    """A created (never started) container labelled as `up` labels a stack of ROOT's profile NAME."""
    project = f"composegen-{name}"
    labels = {
        "io.composegen.profile": name,
        "com.docker.compose.project": project,
        "com.docker.compose.service": "vllm",
        "com.docker.compose.project.config_files": str(root / "out" / name / "compose.yaml"),
    }
    argv = ["docker", "create", "--name", f"{name}-vllm"]
    argv += [a for k, v in labels.items() for a in ("--label", f"{k}={v}")]
    subprocess.run([*argv, "composegen/base:py3", "true"], check=True, capture_output=True)
    return project


@pytest.mark.docker
def test_status_lists_this_projects_stacks_and_all_of_them_with_all(tmp_path):
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    for root in (ours, theirs):
        assert run_cli("init", str(root), cwd=tmp_path).returncode == 0
    tag = uuid.uuid4().hex[:8]
    mine, other = f"st{tag}-mine", f"st{tag}-other"
    projects = [_stack(ours, mine), _stack(theirs, other)]
    try:
        res = run_cli("--root", str(ours), "status", "--json")
        assert res.returncode == 0, res.stderr
        report = json.loads(res.stdout)
        names = {s["profile"] for s in report["stacks"]}
        assert mine in names and other not in names, names
        assert report["project"] == str(ours.resolve())
        text = run_cli("--root", str(ours), "status")
        assert mine in text.stdout and other not in text.stdout, text.stdout
        every = json.loads(run_cli("--root", str(ours), "status", "--all", "--json").stdout)
        assert {mine, other} <= {s["profile"] for s in every["stacks"]}
    finally:
        for project in projects:
            force_remove(project)
