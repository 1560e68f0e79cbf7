"""`qualify --sleep-cycles` on a profile with speculative decoding (issue 49 #3): a level-2 wake that does not
reload the draft (vLLM issue 52487; EMU_FAULT=draft_not_reloaded) keeps the temperature-0 answers equal, so
only the draft's acceptance over the probe — vLLM's spec-decode counters on /metrics — shows it: the
qualification fails on that drop, and passes without the fault."""

from __future__ import annotations

import json

import pytest

from tests.edge.test_qualify_alias_engine import set_fault, with_qualify
from tests.support.edge import edge_project, serving

pytestmark = pytest.mark.docker
EMU = {"EMU_WEIGHTS_GIB": "0.0043", "EMU_DECODE_TOK_S": "200"}
SPEC = "max-num-seqs: 1\n  speculative-config: {method: mtp, num_speculative_tokens: 3}\n"


def test_sleep_cycles_fail_when_a_level_2_wake_leaves_the_draft_unloaded(tmp_path, edge_img):
    project = edge_project(tmp_path, edge_img, load=2, standby=True, both_env=EMU, share=0.45)
    with_qualify(project, project.old, project.new)
    path = project.root / "profiles" / f"{project.new}.yaml"
    text = path.read_text(encoding="utf-8").replace("max-num-seqs: 1\n", SPEC)
    path.write_text(text.replace("standby: {level: 1}", "standby: {level: 2}"), encoding="utf-8")
    argv = ("qualify", project.new, "--sleep-cycles", "2", "--emulate", "--json")
    with serving(project) as edge:
        edge.ok("render")
        good = edge.cli(*argv, timeout=600)
        assert good.returncode == 0, (good.stdout, good.stderr)
        slept = json.loads(good.stdout)["sleep"]
        before = slept["draft_acceptance_before"]
        assert slept["level"] == 2 and before > 0.3, slept
        assert all(c["draft_acceptance"] >= before / 2 for c in slept["cycles"]), slept

        set_fault(edge, edge.new, "draft_not_reloaded")
        bad = edge.cli(*argv, timeout=600)
        assert bad.returncode == 1, (bad.stdout, bad.stderr)
        found = json.loads(bad.stdout)
        (crit,) = [c for c in found["criteria"] if c["name"] == "sleep"]
        assert not crit["passed"] and "draft's acceptance fell" in crit["reason"], crit
        cycles = found["sleep"]["cycles"]
        assert all(c["same_answer"] for c in cycles), cycles
        assert cycles[0]["draft_acceptance"] < found["sleep"]["draft_acceptance_before"] / 2, cycles
