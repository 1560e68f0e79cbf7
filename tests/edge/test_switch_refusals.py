"""What a switch refuses or skips before its first step (issue 51 #6, #11): an alias that already serves
the profile is exit 0 before any proof is asked for; an edge that is not running is one line naming
`edge up`, with no mark left on the alias and nothing started."""

from __future__ import annotations

import json

import pytest

from composegen.edge import journal, routes, service
from composegen.project import Project
from tests.support.cli import run_inproc
from tests.support.edge import edge_project, sealed_decision
from tests.support.engine import force_remove

# never pulled: the edge is not started here
IMAGE = "127.0.0.1:5000/composegen-edge-caddy@sha256:" + "0" * 64


@pytest.fixture
def edge(tmp_path):
    project = edge_project(tmp_path, IMAGE)
    yield project
    for profile in (project.old, project.new):
        force_remove(f"composegen-{profile}")  # only if a refusal failed and a stack started


def test_promote_to_the_profile_the_alias_serves_is_a_no_op_before_the_proof(edge):
    # no qualify run, no campaign: nothing would vouch for it, and nothing needs to
    res = run_inproc(
        "--root", str(edge.root), "promote", edge.old, "--alias", "ds4-flash", "--json"
    )
    assert res.returncode == 0, res.stdout + res.stderr
    doc = json.loads(res.stdout)
    assert (doc["path"], doc["previous"], doc["profile"]) == ("unchanged", edge.old, edge.old)
    text = run_inproc("--root", str(edge.root), "promote", edge.old, "--alias", "ds4-flash")
    assert text.stdout.startswith(f"ds4-flash already serves {edge.old}"), text.stdout
    assert not routes.assignments_path(Project(edge.root)).exists()  # nothing recorded


@pytest.mark.docker
@pytest.mark.parametrize("verb", ["rollback", "promote"])
def test_a_switch_with_the_edge_down_names_edge_up_and_marks_nothing(edge, verb):
    project = Project(edge.root)
    e = service.load(project)
    routes.record(project, e, "ds4-flash", edge.new, "promote", None)  # old, then new
    routes.publish(project, e)
    sealed_decision(project, "c1", edge.old)  # the proof promote asks for first
    argv = (
        ["promote", edge.old, "--alias", "ds4-flash", "--campaign", "c1"]
        if verb == "promote"
        else [verb, "ds4-flash"]
    )
    res = run_inproc("--root", str(edge.root), *argv, "--emulate")
    assert res.returncode == 3, res.stdout + res.stderr
    assert edge.name in res.stderr and "not running" in res.stderr
    assert "`composegen edge up`" in res.stderr and "restoring" not in res.stderr, res.stderr
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) <= 2, res.stderr
    published = json.loads(routes.routes_path(project).read_text())
    assert published["aliases"]["ds4-flash"]["switch"] is None, published
    assert not journal.journal_path(project).exists()
    assert routes.current(project, e, "ds4-flash") == edge.new  # nothing moved
