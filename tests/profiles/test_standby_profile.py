"""`standby:` in a profile (issue 37): the render adds vLLM's sleep mode and its dev mode, diff classes both as
functional, and what would open the dev routes another way, or where nothing guards them, is refused."""

from __future__ import annotations

import shutil

import pytest

from tests.support.cli import assert_bad_input, run_inproc
from tests.support.helpers import REPO

STANDBY = (
    "extends: 4096-131k\nstandby: {level: 1}\nservice: {port: {host: 39077}, container_name: sb}\n"
)


@pytest.fixture
def team(tmp_path):
    """A copy of examples/team-edge with a standby profile `sb`, behind the edge or not."""
    root = tmp_path / "team"
    shutil.copytree(REPO / "examples/team-edge", root, ignore=shutil.ignore_patterns("out"))
    (root / "profiles/sb.yaml").write_text(STANDBY + "model: {served_name: sb-served}\n")
    return root


def _behind_the_edge(root) -> None:
    edge = root / "edge.yaml"
    text = edge.read_text()
    assert "stacks: [8192-131k, 4096-131k, " in text, "the example's edge.yaml changed its stacks"
    edge.write_text(
        text.replace("stacks: [8192-131k, 4096-131k, ", "stacks: [8192-131k, 4096-131k, sb, ")
    )


def test_standby_renders_sleep_mode_and_dev_mode_and_diff_calls_them_functional(team):
    _behind_the_edge(team)
    res = run_inproc("--root", str(team), "render")
    assert res.returncode == 0, res.stderr
    compose = (team / "out/sb/compose.yaml").read_text()
    assert '- "--enable-sleep-mode"' in compose and 'VLLM_SERVER_DEV_MODE: "1"' in compose
    # its published port taken away behind the edge
    assert (team / "out/edge/stacks/sb.yaml").is_file()
    diff = run_inproc("--root", str(team), "diff", "4096-131k", "sb")
    assert diff.returncode == 1
    assert "functional  --enable-sleep-mode" in diff.stdout
    assert "functional  environment VLLM_SERVER_DEV_MODE  (absent) → 1" in diff.stdout


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("vllm: {enable-sleep-mode: true}", "vllm.enable-sleep-mode: set by composegen from standby"),
        ('service: {environment: {VLLM_SERVER_DEV_MODE: "1"}}', "service.environment.VLLM_SERVER_DEV_MODE: set by"),
        ("standby: {level: 3}", "standby.level: Input should be 1 or 2"),
        ("standby: {level: 1, wake: fast}", "standby.wake: unknown key"),
    ],
)  # fmt: skip
def test_what_would_open_the_dev_routes_another_way_is_refused(team, text, message):
    (team / "profiles/p.yaml").write_text(f"extends: 4096-131k\n{text}\n")
    assert_bad_input(
        run_inproc("--root", str(team), "render", "p"), f"profiles/p.yaml:2: {message}"
    )
    assert not (team / "out/p").exists()


def test_standby_outside_the_edge_or_across_nodes_is_refused(team):
    assert_bad_input(
        run_inproc("--root", str(team), "render"),
        "profiles/sb.yaml: standby: sb is not behind the edge",
    )
    assert not (team / "out").exists()
    shutil.copy(REPO / "profiles/dspark-2x.yaml", team / "profiles/dspark-2x.yaml")
    (team / "profiles/multi.yaml").write_text("extends: dspark-2x\nstandby: {level: 2}\n")
    res = run_inproc("--root", str(team), "render", "multi")
    assert_bad_input(res, "profiles/multi.yaml:2: standby: not for multi-node stacks yet")
