"""Every output that carries a figure says EMULATED when an input was emulated: `compare` (text, --markdown,
--json), the `evidence` summary and `plan` — from a run recorded on the emulator, next to a recorded real log;
and on the real engine, from a stack brought up with --emulate."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from composegen.evidence import bundle as evidence
from composegen.profiles import resolve as profile
from composegen.project import Project
from composegen.stack.reports import LiveIdentity
from composegen.vllm import startup
from tests.support.cli import run_cli
from tests.support.engine import emulated_project, force_remove
from tests.support.helpers import REPO

LOG = REPO / "tests/data/logs/vllm-0.33.0-r33-4096-arm.log"


@pytest.fixture
def runs(tmp_path):
    shutil.copytree(REPO / "profiles", tmp_path / "profiles")
    project = Project(tmp_path)
    real = evidence.from_log(project, "4096-131k", LOG)
    r = profile.load(project, "4096-131k")
    report = startup.parse_startup_log(LOG.read_text())
    container = LiveIdentity(
        hash=r.hash, image_id="sha256:" + "e" * 64, emulated=True, repo_digests=[]
    )
    emulated = evidence.write_run(
        project, r, startup_log_text=LOG.read_text(), startup_report=report, container=container
    )
    return tmp_path, str(real), str(emulated)


def test_compare_names_the_emulated_side_in_text_markdown_and_json(runs):
    root, real, emulated = runs
    text = run_cli("--root", str(root), "compare", real, emulated).stdout
    assert (
        text.splitlines()[0] == "EMULATED vLLM in b: these figures exercise composegen, not a model"
    )
    assert text.splitlines()[1].startswith(
        "not comparable: one ran the EMULATED vLLM, the other a real"
    )
    assert re.search(
        r"^Measurement +4096-131k \(a\) +4096-131k \(b, EMULATED\) +Change$", text, re.M
    ), text
    md = run_cli("--root", str(root), "compare", real, emulated, "--markdown").stdout
    assert (
        md.startswith("> **EMULATED vLLM in b:")
        and "| 4096-131k (a) | 4096-131k (b, EMULATED) |" in md
    )
    doc = json.loads(run_cli("--root", str(root), "compare", real, emulated, "--json").stdout)
    assert (doc["a"]["emulated"], doc["b"]["emulated"]) == (False, True)
    both_real = run_cli("--root", str(root), "compare", real, real).stdout
    assert "EMULATED" not in both_real  # nothing said when no input was emulated


def test_evidence_summary_and_plan_say_emulated_only_when_it_was(runs):
    root, real, emulated = runs
    summary = evidence.format_text(evidence.load_run(emulated))
    assert summary.splitlines()[1].startswith("  EMULATED  vLLM test double")
    assert "EMULATED" not in evidence.format_text(evidence.load_run(real))
    planned = run_cli("--root", str(root), "plan", "393k-gpu", "--from", emulated)
    assert planned.returncode == 0, planned.stderr
    head, cal = planned.stdout.splitlines()[:2]
    assert (
        head.endswith("PREDICTED, from an EMULATED calibration")
        and "calibration (measured)" not in planned.stdout
    )
    assert cal.startswith("  calibration (EMULATED vLLM, not a model): weights")
    as_json = json.loads(
        run_cli("--root", str(root), "plan", "393k-gpu", "--from", emulated, "--json").stdout
    )
    assert as_json["calibration"]["emulated"] is True
    measured = run_cli("--root", str(root), "plan", "393k-gpu", "--from", real).stdout
    assert "calibration (measured)" in measured and "EMULATED" not in measured


@pytest.mark.docker
def test_a_stack_up_with_emulate_is_labelled_in_evidence_compare_and_plan(tmp_path):
    root, name, _ = emulated_project(tmp_path, load=0.2)
    try:
        assert run_cli("--root", str(root), "up", name, "--emulate").returncode == 0
        made = run_cli("--root", str(root), "evidence", name)
        assert made.returncode == 0, made.stderr
        assert "  EMULATED  vLLM test double" in made.stdout
        run = str(root / made.stdout.splitlines()[0].removeprefix("run "))
        compared = run_cli("--root", str(root), "compare", run, run, "--markdown")
        assert compared.returncode == 0, compared.stderr
        assert compared.stdout.startswith("> **EMULATED vLLM in a and b:")
        planned = run_cli("--root", str(root), "plan", name, "--from", run)
        assert "calibration (EMULATED vLLM, not a model)" in planned.stdout, (
            planned.stdout + planned.stderr
        )
    finally:
        run_cli("--root", str(root), "down", name)
        force_remove(f"composegen-{name}")
