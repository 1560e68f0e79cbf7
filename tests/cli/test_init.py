"""`composegen init`: a starter project that validates, renders a file compose accepts, and is never clobbered."""

from __future__ import annotations

import subprocess

from tests.support.helpers import run_cli


def test_init_scaffolds_a_project_that_validates_and_renders(tmp_path):
    res = run_cli("init", str(tmp_path), "--name", "first")
    assert res.returncode == 0, res.stderr
    profile = (tmp_path / "profiles" / "first.yaml").read_text()
    assert profile.startswith("# yaml-language-server: $schema=./schema.json")
    assert (tmp_path / "profiles" / "schema.json").is_file()
    assert (tmp_path / "out" / "first" / "compose.yaml").is_file()  # rendered already: `up first` can run
    assert run_cli("--root", str(tmp_path), "render", "--check").returncode == 0
    # Every field of the starter carries a comment, so a newcomer reads what it means.
    fields = [line for line in profile.splitlines() if line.strip() and not line.lstrip().startswith(("#", "-"))]
    uncommented = [line for line in fields if "#" not in line and not line.rstrip().endswith(":")]
    assert len(uncommented) <= len(fields) // 3, uncommented
    assert run_cli("--root", str(tmp_path), "validate", "first").returncode == 0
    assert run_cli("--root", str(tmp_path), "render", "first").returncode == 0
    compose = tmp_path / "out" / "first" / "compose.yaml"
    check = subprocess.run(["docker", "compose", "-f", str(compose), "config", "-q"], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


def test_init_refuses_a_project_that_has_profiles(tmp_path):
    assert run_cli("init", str(tmp_path)).returncode == 0
    before = (tmp_path / "profiles" / "starter.yaml").read_bytes()
    res = run_cli("init", str(tmp_path))
    assert res.returncode == 2 and "already holds profiles" in res.stderr and "Traceback" not in res.stderr
    assert (tmp_path / "profiles" / "starter.yaml").read_bytes() == before


def test_init_refuses_a_name_compose_cannot_use(tmp_path):
    res = run_cli("init", str(tmp_path), "--name", "Big Model")
    assert res.returncode == 2 and "--name" in res.stderr
    assert not (tmp_path / "profiles").exists()
