"""`diff NAME --targets compose,k8s`: the two renderings are functionally equal, and only the target's own
differences are listed; a real difference (argv, GPUs, shm, image, environment) fails it."""

from __future__ import annotations

import json
import shutil

import yaml

from tests.support.cli import run_cli
from tests.support.helpers import REPO


def test_dspark_targets_are_functionally_equal():
    res = run_cli("diff", "dspark-2x", "--targets", "compose,k8s", "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    report = json.loads(res.stdout)
    assert report["equal"] is True
    facts = {(f["node"], f["fact"]) for f in report["facts"] if f["equal"]}
    for node in ("spark-1 (rank 0)", "spark-2 (rank 1)"):
        assert {(node, f) for f in ("argv", "image", "environment", "gpus", "shm")} <= facts
    only = {(t["node"], t["setting"]) for t in report["target_only"]}
    assert ("spark-2 (rank 1)", "command.--master-addr") in only and (
        "spark-1 (rank 0)",
        "ulimits",
    ) in only
    assert {s for _, s in only} <= {
        "command.--master-addr", "container_name", "init", "ulimits", "devices", "ipc", "network_mode",
        "cap_add", "ports", "restart", "stop_grace_period", "healthcheck", "volumes", "labels",
    }  # fmt: skip


def test_checked_in_files_compare_equal_and_a_changed_arg_is_a_difference(tmp_path):
    res = run_cli(
        "diff", "out/4096-131k/compose.yaml", "out/4096-131k/k8s/", "--targets", "compose,k8s"
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "functionally equal" in res.stdout and "ulimits" in res.stdout
    k8s = tmp_path / "k8s"
    shutil.copytree(REPO / "out/4096-131k/k8s", k8s)
    path = k8s / "deployment.yaml"
    doc = yaml.safe_load(path.read_text())
    c = doc["spec"]["template"]["spec"]["containers"][0]
    c["args"] = [a.replace("--max-num-seqs=1", "--max-num-seqs=2") for a in c["args"]]
    c["resources"]["limits"]["nvidia.com/gpu"] = 1
    path.write_text(yaml.safe_dump(doc))
    res = run_cli(
        "diff", "out/4096-131k/compose.yaml", str(k8s), "--targets", "compose,k8s", "--json"
    )
    assert res.returncode == 1, res.stdout + res.stderr
    report = json.loads(res.stdout)
    assert not report["equal"]
    assert {f["fact"] for f in report["facts"] if not f["equal"]} == {"argv", "gpus"}


def test_multi_node_out_directory_against_its_k8s_directory():
    res = run_cli(
        "diff", "out/dspark-2x", "out/dspark-2x/k8s", "--targets", "compose,k8s", "--json"
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert json.loads(res.stdout)["equal"] is True


def test_bad_targets_and_missing_side_are_bad_input():
    assert run_cli("diff", "r33", "--targets", "compose,swarm").returncode == 2
    assert run_cli("diff", "r33").returncode == 2
    res = run_cli(
        "diff", "out/r33/compose.yaml", "out/r33/compose.yaml", "--targets", "compose,k8s"
    )
    assert res.returncode == 2 and "directory" in res.stderr


def test_hostile_or_broken_k8s_sides_are_one_line_of_bad_input(tmp_path):
    cases = {
        "aliases": "a: &x [1]\nb: [*x, *x]\n",
        "no-containers": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {template: {spec: {}}}\n",
        "not-yaml": "a: [\n",
    }
    for name, text in cases.items():
        k8s = tmp_path / name
        k8s.mkdir()
        (k8s / "kustomization.yaml").write_text("resources: [deployment.yaml]\n")
        (k8s / "deployment.yaml").write_text(text)
        res = run_cli("diff", "out/4096-131k/compose.yaml", str(k8s), "--targets", "compose,k8s")
        assert res.returncode == 2, (name, res.stdout, res.stderr)
        assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr, (
            name,
            res.stderr,
        )
    (tmp_path / "escape").mkdir()
    (tmp_path / "escape" / "kustomization.yaml").write_text("resources: [../../etc/passwd]\n")
    res = run_cli(
        "diff", "out/4096-131k/compose.yaml", str(tmp_path / "escape"), "--targets", "compose,k8s"
    )
    assert res.returncode == 2 and "not a file of this directory" in res.stderr
