"""What a newcomer trips on (issue 20), through the CLI: profile names for runs, the evidence summary,
`validate --strict`, a typo'd profile, and the exit codes the docs promise."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.support.cli import run_cli
from tests.support.helpers import REPO

LOGS = REPO / "tests/data/logs"


@pytest.fixture
def project(tmp_path):
    shutil.copytree(REPO / "profiles", tmp_path / "profiles")
    return tmp_path


def evidence_from_log(root, log: str, profile: str):
    return run_cli(
        "--root", str(root), "evidence", "--from-log", str(LOGS / log), "--profile", profile
    )


def test_compare_takes_profile_names_and_uses_each_ones_latest_run(project):
    assert evidence_from_log(project, "vllm-0.33.0-r33-8192-arm.log", "8192-131k").returncode == 0
    assert evidence_from_log(project, "vllm-0.33.0-r33-4096-arm.log", "4096-131k").returncode == 0
    # same second: a -2 suffix
    newest = evidence_from_log(project, "vllm-0.33.0-r33-4096-arm.log", "4096-131k")
    assert newest.returncode == 0, newest.stderr
    newest_path = project / newest.stdout.splitlines()[0].removeprefix("run ")
    by_name = run_cli("--root", str(project), "compare", "8192-131k", "4096-131k", "--json")
    assert by_name.returncode == 0, by_name.stderr
    result = json.loads(by_name.stdout)
    assert (result["a"]["profile"], result["b"]["profile"]) == ("8192-131k", "4096-131k")
    assert result["b"]["run"] == str(newest_path)
    by_path = run_cli(
        "--root", str(project), "compare", result["a"]["run"], str(newest_path), "--json"
    )
    assert json.loads(by_path.stdout)["rows"] == result["rows"]
    text = run_cli("--root", str(project), "compare", "8192-131k", "4096-131k").stdout
    assert "Engine-reported GPU KV tokens           283,917    553,243" in text
    # Everything else that reads a run takes the same names.
    assert (
        run_cli("--root", str(project), "plan", "393k-gpu", "--from", "4096-131k").returncode == 0
    )
    assert (
        run_cli("--root", str(project), "report", "8192-131k", "4096-131k", "--markdown").returncode
        == 0
    )


def test_a_profile_without_a_run_says_how_to_make_one(project):
    assert evidence_from_log(project, "vllm-0.33.0-r33-8192-arm.log", "8192-131k").returncode == 0
    res = run_cli("--root", str(project), "compare", "8192-131k", "r33")
    assert res.returncode == 2, res.stderr
    assert "r33: run: profile r33 has no run under runs/" in res.stderr
    assert "composegen evidence r33" in res.stderr and "Traceback" not in res.stderr
    res = run_cli("--root", str(project), "compare", "8192-131k", "no-such-thing")
    assert (
        res.returncode == 2
        and "no such run directory" in res.stderr
        and "profile name" in res.stderr
    )


def test_evidence_prints_what_it_recorded(project):
    res = evidence_from_log(project, "vllm-0.33.0-r33-4096-arm.log", "4096-131k")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith("run runs/") and lines[0].endswith("-4096-131k")
    assert (project / lines[0].removeprefix("run ") / "evidence.json").is_file()
    text = res.stdout
    assert "profile   4096-131k (hash " in text and "source log" in text
    assert "KV        553243 tokens, 15.99 GiB min rank" in text
    assert "gates     not run" in text and "ladder    not run" in text
    assert "unknown   compose_sha256, gates, image_digest, ladder" in text
    assert "raw       startup.log " in text and "raw       startup.json " in text


def test_validate_strict_never_says_ok_before_failing(project):
    # A tag without image_policy: local-build is a finding (dspark-2x, which opts in, passes).
    (project / "profiles" / "tagged.yaml").write_text(
        "extends: r33\nimage: vllm-local:dev\nimage_unpinned_reason: a dev build\n",
        encoding="utf-8",
    )
    res = run_cli("--root", str(project), "validate", "--strict", "r33", "tagged")
    assert res.returncode == 1, res.stderr
    assert "ok  r33" in res.stdout.splitlines()  # no warnings: still ok
    assert "warnings present (--strict)  tagged" in res.stdout.splitlines()
    assert "ok  tagged" not in res.stdout
    lenient = run_cli("--root", str(project), "validate", "tagged")
    assert lenient.returncode == 0 and "ok  tagged" in lenient.stdout.splitlines()
    assert run_cli("--root", str(project), "validate", "--strict", "r33").returncode == 0


def test_a_mistyped_profile_is_answered_the_same_way_by_every_command(project):
    for command in ("render", "show", "validate", "diff"):
        args = [command, "r3"] + (["r33"] if command == "diff" else [])
        res = run_cli("--root", str(project), *args)
        assert res.returncode == 2 and "(did you mean 'r33'?)" in res.stderr, (command, res.stderr)
    res = run_cli("--root", str(project), "render", "nope")
    assert res.returncode == 2 and "no such profile 'nope'" in res.stderr
    assert "(profiles: 393k-gpu, 393k-offload, 4096-131k, 8192-131k, dspark-2x, r33)" in res.stderr
    assert not (project / "out").exists()  # nothing written


def test_up_on_stale_out_is_a_failed_check(project):
    assert run_cli("--root", str(project), "render", "4096-131k").returncode == 0
    path = project / "profiles" / "4096-131k.yaml"
    path.write_text(
        path.read_text().replace("max-num-batched-tokens: 4096", "max-num-batched-tokens: 2048")
    )
    res = run_cli("--root", str(project), "up", "4096-131k", "--emulate")
    assert res.returncode == 1, res.stderr
    assert "out/4096-131k/compose.yaml is stale" in res.stderr and "composegen render" in res.stderr
