"""The seed's A/B through the CLI: evidence from recorded logs, compare, plan."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from composegen.vllm.startup import parse_startup_log
from tests.support.cli import run_cli
from tests.support.helpers import REPO

LOGS = REPO / "tests/data/logs"


@pytest.fixture
def project(tmp_path):
    shutil.copytree(REPO / "profiles", tmp_path / "profiles")
    return tmp_path


def _run_from_log(root, log, profile):
    res = run_cli(
        "--root",
        str(root),
        "evidence",
        "--from-log",
        str(LOGS / log),
        "--profile",
        profile,
        "--json",
    )
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["path"].startswith("runs/") and doc["path"].endswith(profile)
    return str(root / doc["path"])


def test_compare_reproduces_the_seed_change_column_and_flags_it(project):
    a = _run_from_log(project, "vllm-0.33.0-r33-8192-arm.log", "8192-131k")
    b = _run_from_log(project, "vllm-0.33.0-r33-4096-arm.log", "4096-131k")
    md = run_cli("--root", str(project), "compare", a, b, "--markdown").stdout
    for cell in (
        "+0.72 GiB / +4.715%",
        "+269,326 / +94.861%",
        "+2.05x",
        "-0.59 GiB / -34.104%",
        "-0.13 GiB",
    ):
        assert cell in md
    result = json.loads(run_cli("--root", str(project), "compare", a, b, "--json").stdout)
    assert result["unexplained_capacity_change"]["flag"] is True
    assert [c["path"] for c in result["config"]["functional"]] == [
        "services.vllm.command.--max-num-batched-tokens"
    ]
    # each bundle carries its comparability record; compare shows it beside the figures
    record = json.loads((Path(a) / "evidence.json").read_text())["comparability"]
    started = parse_startup_log((LOGS / "vllm-0.33.0-r33-8192-arm.log").read_text()).cache
    assert record["engine_start"] == (started or "unknown")
    assert (record["cpu_governor"], record["load_start"]) == ("unknown", None)  # a recorded log
    assert (
        f"a (8192-131k): client CPU governor unknown, load unknown; engine start {started or 'unknown'}; "
        in md
    )


def test_plan_393k_from_the_4096_arm_fits_and_from_the_8192_arm_warns():
    fit = json.loads(
        run_cli(
            "plan", "393k-gpu", "--from-log", str(LOGS / "vllm-0.33.0-r33-4096-arm.log"), "--json"
        ).stdout
    )
    assert fit["verdict"] == "fits"
    assert fit["predicted"]["gpu_tokens"] == pytest.approx(553_243, rel=0.01)
    assert fit["predicted"]["concurrency"] == pytest.approx(1.41, abs=0.01)
    warned = json.loads(
        run_cli(
            "plan", "393k-gpu", "--from-log", str(LOGS / "vllm-0.33.0-r33-8192-arm.log"), "--json"
        ).stdout
    )
    assert any("max-num-batched-tokens" in w for w in warned["warnings"])
    assert (
        warned["predicted"]["range"]["low_tokens"]
        < warned["predicted"]["gpu_tokens"]
        < warned["predicted"]["range"]["high_tokens"]
    )


def test_plan_needs_exactly_one_source():
    res = run_cli("plan", "393k-gpu")
    assert res.returncode == 2 and "exactly one of --from RUN or --from-log FILE" in res.stderr


@pytest.mark.parametrize(
    "key,value",
    [("profile", "x"), ("gates", {"passed": 1}), ("startup", []), ("ladder", {"rows": []})],
)
def test_a_malformed_bundle_is_bad_input_not_a_crash(project, key, value):
    run = _run_from_log(project, "vllm-0.33.0-r33-4096-arm.log", "4096-131k")
    path = f"{run}/evidence.json"
    with open(path) as fh:
        doc = json.load(fh)
    doc[key] = value
    with open(path, "w") as fh:
        json.dump(doc, fh)
    res = run_cli("--root", str(project), "compare", run, run)
    assert (
        res.returncode == 2
        and f"evidence.json: {key}" in res.stderr
        and "internal error" not in res.stderr
    )
