"""`bench NAME --via-edge` refuses, before any request or key, what it cannot measure (exit 2, one line
saying why); no engine needed. The runs themselves: test_bench_via_edge_engine.py."""

from __future__ import annotations

import pytest

from tests.edge.test_edge_config import GOOD, project
from tests.support.cli import run_cli

SIZES = ("--requests", "1", "--input-tokens", "8", "--output-tokens", "2")


@pytest.mark.parametrize(
    ("edge_text", "name", "message"),
    [
        (None, "old", "edge.yaml: no edge configured in this project"),
        (GOOD.replace("[old, new]", "[old]"), "new", "new is not behind the edge (edge.yaml stacks: old)"),
        (GOOD, "new", "bench --via-edge: no alias of the edge points at new (aliases: ds4-flash -> old)"),
    ],
)  # fmt: skip
def test_a_stack_the_edge_does_not_front_is_refused(tmp_path, edge_text, name, message):
    root = project(tmp_path, edge_text or GOOD)
    if edge_text is None:
        (root / "edge.yaml").unlink()
    res = run_cli("--root", str(root), "bench", name, "--via-edge", *SIZES)
    assert res.returncode == 2, res.stderr
    assert message in res.stderr and "Traceback" not in res.stderr
    assert not (root / ".composegen" / "edge" / "keys.json").exists()  # no key was ever made


def test_options_that_do_not_go_with_it_are_refused(tmp_path):
    root = project(tmp_path, GOOD)
    both = run_cli("--root", str(root), "bench", "old", "--via-edge", "--save-vllm-results",
                   str(tmp_path / "vllm"), *SIZES)  # fmt: skip
    assert both.returncode == 2 and "--save-vllm-results: not with --via-edge" in both.stderr
    alone = run_cli("--root", str(root), "evidence", "old", "--bench-via-edge")
    assert alone.returncode == 2 and "--bench-via-edge needs --bench LEVELS" in alone.stderr
