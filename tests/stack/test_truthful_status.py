"""`status` tells the truth: a profile changed (or reverted) while its stack runs is drifted even when
out/ still matches; a stack removed with `docker rm -f` leaves its network reported and `down` removes
it; a --timeout that is not a finite positive number is refused (exit 2)."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.support.cli import run_cli
from tests.support.engine import emulated_project, force_remove, project_leftovers
from tests.support.helpers import MINIMAL, make_project


@pytest.mark.docker
def test_a_profile_changed_while_running_is_drifted_even_when_out_still_matches(tmp_path):
    root, name, _ = emulated_project(tmp_path)
    try:
        assert run_cli("--root", str(root), "up", name, "--emulate").returncode == 0
        path = root / "profiles" / f"{name}.yaml"
        original = path.read_text()
        # not rendered: out/ unchanged
        path.write_text(original.replace("max-num-seqs: 1", "max-num-seqs: 2"))
        drift = json.loads(run_cli("--root", str(root), "status", name, "--json").stdout)["stacks"][
            0
        ]["drift"]
        assert drift["state"] == "drifted" and drift["newer"] == "profile"
        assert drift["running"] == drift["out"] != drift["profile"]
        assert "drifted (profile is newer)" in run_cli("--root", str(root), "status", name).stdout
        # evidence agrees: the hash differs
        refused = run_cli("--root", str(root), "evidence", name)
        assert refused.returncode == 1 and "not running" in refused.stderr

        path.write_text(original)  # reverted: what runs is what the profile says again
        drift = json.loads(run_cli("--root", str(root), "status", name, "--json").stdout)["stacks"][
            0
        ]["drift"]
        assert drift["state"] == "in-sync" and drift["running"] == drift["out"] == drift["profile"]
        assert run_cli("--root", str(root), "down", name).returncode == 0
    finally:
        force_remove(f"composegen-{name}")


@pytest.mark.docker
def test_a_stack_removed_with_docker_rm_leaves_its_network_reported_and_down_removes_it(tmp_path):
    root, name, _ = emulated_project(tmp_path)
    project = f"composegen-{name}"
    try:
        assert run_cli("--root", str(root), "up", name, "--emulate").returncode == 0
        ids = subprocess.run(
            ["docker", "ps", "-aq", "--filter", f"label=com.docker.compose.project={project}"],
            capture_output=True,
            text=True,
        ).stdout.split()
        subprocess.run(["docker", "rm", "-f", *ids], check=True, capture_output=True)
        # compose's network outlives rm -f
        assert project_leftovers(project) == [f"{project}_default"]

        stack = json.loads(run_cli("--root", str(root), "status", name, "--json").stdout)["stacks"][
            0
        ]
        assert stack["containers"] == [] and stack["networks"] == [f"{project}_default"]
        text = run_cli("--root", str(root), "status", name).stdout
        assert (
            f"network {project}_default left without its containers; `composegen down {name}`"
            in text
        )
        # found without naming the profile too
        everything = run_cli("--root", str(root), "status").stdout
        assert f"{name}: network {project}_default left without its containers" in everything

        res = run_cli("--root", str(root), "down", name, "--json")
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout)["networks"] == [f"{project}_default"]
        assert project_leftovers(project) == []
    finally:
        force_remove(project)


@pytest.mark.parametrize(
    "args",
    [
        ("up", "tiny", "--timeout", "nan"),
        ("up", "tiny", "--timeout", "inf"),
        ("up", "tiny", "--timeout", "-5"),
        ("up", "tiny", "--timeout", "0"),
        ("down", "tiny", "--timeout", "-1"),
    ],
)
def test_a_timeout_that_is_not_a_finite_positive_number_is_refused(tmp_path, args):
    root = make_project(tmp_path, {"tiny": MINIMAL})
    res = run_cli("--root", str(root), *args)
    assert res.returncode == 2, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "--timeout must be" in res.stderr
    # refused before anything
    assert not (root / "out").exists() and not (root / ".composegen").exists()
