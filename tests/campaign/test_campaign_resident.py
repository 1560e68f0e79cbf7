"""campaign/resident.py's refusals that need no engine: a campaign leaves its engines resident for a
promote only behind an edge, with both profiles on standby and the control serving an alias; else
the record says why the candidate was taken down (the memory plan's refusal: the engine tests)."""

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


def test_a_control_no_alias_serves_is_not_left_serving(tmp_path):
    got = resident.decide(_project(tmp_path, ("ctl", "cand"), "{a: cand}"), "ctl", "cand", True)
    assert not got.resident
    assert got.reason.endswith("no alias serves ctl: a promote would not switch from it")
