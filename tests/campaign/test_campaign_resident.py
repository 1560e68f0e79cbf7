"""campaign/resident.py's decisions that need no engine: a campaign leaves its engines resident for a
promote only behind an edge, with both profiles on standby and an alias serving one of them (that one
left awake); else the record says why the candidate was taken down (the memory plan's refusal: the
engine tests)."""

from __future__ import annotations

from pathlib import Path

from composegen.campaign import resident
from composegen.project import Project
from tests.support.engine import _SINGLE_REST, tiny_profile
from tests.support.helpers import make_project

EDGE = """\
name: edge-resident
listen: {{bind: 127.0.0.1, port: 18443}}
tls: {{mode: internal, names: [localhost]}}
stacks: [ctl, cand]
aliases: {aliases}
"""


def _project(tmp: Path, standby: tuple[str, ...], aliases: str | None) -> Project:
    profiles = {
        name: tiny_profile(
            f"{name}-served",
            f"{{host: {port}}}",
            rest=_SINGLE_REST.format(load=1, extra_env="")
            + ("standby: {level: 1}\n" if name in standby else ""),
        )
        for name, port in (("ctl", 18001), ("cand", 18002))
    }
    root = make_project(tmp, profiles)
    if aliases is not None:
        (root / "edge.yaml").write_text(EDGE.format(aliases=aliases), encoding="utf-8")
    return Project(root)


def test_without_an_edge_the_candidate_is_taken_down_and_the_record_says_why(tmp_path):
    got = resident.decide(_project(tmp_path, ("ctl", "cand"), None), "ctl", "cand", True)
    assert not got.resident
    assert got.reason == "cand taken down: no edge.yaml: standby stacks switch behind an edge"


def test_a_profile_without_standby_keeps_the_pair_from_staying_resident(tmp_path):
    got = resident.decide(_project(tmp_path, ("ctl",), "{a: ctl}"), "ctl", "cand", True)
    assert (got.resident, got.reason) == (False, "cand taken down: cand without `standby:`")


def test_when_the_alias_serves_the_candidate_it_is_the_one_left_awake(tmp_path):
    # (no stack runs here: the plan cannot size the GPUs, so it does not refuse; the engine tests)
    got = resident.decide(_project(tmp_path, ("ctl", "cand"), "{a: cand}"), "ctl", "cand", True)
    assert (got.resident, got.awake) == (True, "cand")
    assert got.reason.startswith("ctl asleep beside cand awake"), got.reason
    assert "`composegen promote ctl --alias ALIAS` switches by sleep" in got.reason


def test_the_control_is_left_awake_when_an_alias_serves_it(tmp_path):
    got = resident.decide(_project(tmp_path, ("ctl", "cand"), "{a: ctl}"), "ctl", "cand", True)
    assert (got.resident, got.awake) == (True, "ctl")
    assert got.reason.startswith("cand asleep beside ctl awake"), got.reason


def test_a_pair_no_alias_serves_is_not_left_resident(tmp_path):
    got = resident.decide(_project(tmp_path, ("ctl", "cand"), "{}"), "ctl", "cand", True)
    assert not got.resident and got.awake is None
    assert got.reason == (
        "cand taken down: no alias serves ctl or cand: no promote to switch between them"
    )


def test_aliases_serving_both_keep_the_pair_from_staying_resident(tmp_path):
    # one of them would sleep behind its alias: both must stay awake, so the candidate goes down
    project = _project(tmp_path, ("ctl", "cand"), "{a: ctl, b: cand}")
    assert resident.possible(project, "ctl", "cand") == (
        "aliases serve both ctl and cand: both must stay awake",
        None,
    )
    got = resident.decide(project, "ctl", "cand", True)
    assert (got.resident, got.awake) == (False, None)
    assert got.reason == "cand taken down: aliases serve both ctl and cand: both must stay awake"
