"""A campaign checks before it cuts (issue 50 item 2): every arm's profile rendered (the campaign
renders a missing out/), the engine answering and each arm's port free, before arm 1 starts or stops
anything; a failed campaign says what failed and `campaign resume NAME`, nothing about deciding."""

from __future__ import annotations

import json
import socket

import pytest

from composegen.campaign import precheck, runner, state
from composegen.campaign.progress import CampaignProgress
from composegen.campaign.reports import CampaignOptions
from composegen.errors import CheckFailed
from composegen.profiles import resolve
from composegen.project import Project
from tests.support.campaigns import emulated_ab
from tests.support.cli import run_cli


def test_an_unreachable_engine_fails_before_arm_1_and_says_resume(tmp_path):
    root, control, candidate = emulated_ab(tmp_path)
    assert not (root / "out").exists()
    res = run_cli(
        "--root",
        str(root),
        "campaign",
        "run",
        control,
        candidate,
        "--gate",
        "--emulate",
        env={"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"},
    )
    assert res.returncode == 3, res.stderr
    assert "checked before its first arm and cannot start: the engine" in res.stderr
    assert f"composegen campaign resume {control}-vs-{candidate}" in res.stderr
    assert "decide" not in res.stdout + res.stderr and "Outcome" not in res.stdout
    # rendered by the campaign, and no arm started
    assert (root / "out" / control / "compose.yaml").is_file()
    assert (root / "out" / candidate / "compose.yaml").is_file()
    st = json.loads(
        next((root / "runs" / "campaigns").iterdir()).joinpath("state.json").read_text()
    )
    assert [a["status"] for a in st["arms"]] == ["pending", "pending"]


@pytest.mark.docker
def test_a_taken_port_fails_before_arm_1(tmp_path):
    root, control, candidate = emulated_ab(tmp_path)
    project = Project(root)
    directory = runner.create(project, control, candidate, CampaignOptions(emulate=True), None)
    port = resolve.load(project, candidate).profile.service.port.host
    with socket.socket() as held:
        held.bind(("127.0.0.1", port))
        held.listen()
        with pytest.raises(CheckFailed, match=f"127.0.0.1:{port} is in use") as failed:
            precheck.check(project, state.load(directory), CampaignProgress())
    assert f"profiles/{candidate}.yaml service.port" in failed.value.message
    assert "campaign resume" in (failed.value.hint or "")
