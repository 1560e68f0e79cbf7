"""Two copies of a project on one engine (composegen.yaml's scope): `status`, `down` and a worker's
cache offer tell each copy's stacks apart by their compose project, not by the profile name they
share (the engine is a fake: what it lists is given, what is done with it is tested)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from composegen.errors import BadInput
from composegen.profiles import caches as profile_caches
from composegen.profiles import resolve
from composegen.project import Project
from composegen.stack import caches as stack_caches
from composegen.stack import down, engine, engineclient, placement, status
from composegen.stack.facts import ContainerFacts, NetworkFacts
from tests.support.profiles import BASE, project


def _ctr(profile: str, compose: str, root: str) -> ContainerFacts:
    labels = {
        "io.composegen.profile": profile,
        "com.docker.compose.project": compose,
        "com.docker.compose.service": "vllm",
        "com.docker.compose.project.config_files": f"{root}/out/{profile}/compose.yaml",
    }
    return ContainerFacts(id=compose, name=f"{compose}-vllm", state="exited", running=False,
                          health=None, restarts=0, exit_code=0, started_at=None, labels=labels,
                          image_id="", networks=(), host_port=None)  # fmt: skip


def _engine(monkeypatch, ctrs: list[ContainerFacts], nets: list[str]) -> None:
    rows = [NetworkFacts(n, f"{n}_default", {"com.docker.compose.project": n}) for n in nets]
    monkeypatch.setattr(engine, "composegen_containers", lambda target=None: ctrs)
    monkeypatch.setattr(engine, "composegen_networks", lambda target=None: rows)
    monkeypatch.setattr(
        engine, "project_containers", lambda p, t=None: [c for c in ctrs if c.project == p]
    )
    monkeypatch.setattr(
        engine, "project_networks", lambda p, t=None: [n for n in rows if n.project == p]
    )


def test_all_lists_another_copy_s_stack_of_the_same_profile_while_ours_is_down(
    tmp_path, monkeypatch
):
    root = project(tmp_path / "mine", BASE)
    other = _ctr("p", "alice-p", str(tmp_path / "copy"))
    _engine(
        monkeypatch,
        [other, _ctr("q", "bob-q", "/elsewhere")],
        ["alice-gone", "bob-gone", "web-app"],
    )
    every = status.stack_status(Project(root), every=True)
    assert [(s.profile, s.project) for s in every.stacks] == [
        ("alice-gone", "alice-gone"),
        ("bob-gone", "bob-gone"),
        ("p", "alice-p"),
        ("q", "bob-q"),
    ]  # another copy's networks without containers too; never a project composegen did not start
    assert every.stacks[2].containers[0].name == "alice-p-vllm"
    assert every.stacks[2].drift.state == "unknown"  # not compared with this copy's out/
    assert status.stack_status(Project(root)).stacks == []  # by default: this copy's only


def test_a_broken_profile_s_status_takes_only_this_copy_s_containers(tmp_path, monkeypatch):
    root = project(tmp_path, "service: [broken\n")
    _engine(monkeypatch, [_ctr("p", "alice-p", "/elsewhere")], [])
    assert status.stack_status(Project(root), "p").stacks == []
    _engine(
        monkeypatch, [_ctr("p", "alice-p", "/elsewhere"), _ctr("p", "composegen-p", str(root))], []
    )
    assert [s.project for s in status.stack_status(Project(root), "p").stacks] == ["composegen-p"]


def test_down_removes_this_copy_s_probes_and_never_another_copy_s(tmp_path, monkeypatch):
    """Probe containers an interrupted `up` left are labelled by the node's compose project."""
    root = project(tmp_path, BASE)
    probes = [
        replace(_ctr("p", "", "/x"), id=o, name=o, labels={engine.PROBE_LABEL: o})
        for o in ("composegen-p", "alice-p")
    ]
    removed: list[str] = []
    _engine(monkeypatch, [], [])
    monkeypatch.setattr(
        engine, "probe_containers", lambda o, t=None: [c for c in probes if c.id == o]
    )
    monkeypatch.setattr(engine, "remove_container", lambda c, grace=0: removed.append(c.name))
    dep = placement.deployment(Project(root), resolve.load(Project(root), "p"))
    assert down.down(dep).removed == removed == ["composegen-p"]


def test_a_worker_s_cache_offer_reads_only_the_profile_it_starts(tmp_path, monkeypatch):
    """One broken, unrelated profile must not make every worker start cold."""
    root = project(tmp_path, BASE, extra={"broken": "service: [\n"})
    monkeypatch.setattr(engineclient, "volumes", lambda prefix, on=None: [])
    dep = placement.deployment(Project(root), resolve.load(Project(root), "p"))
    key = profile_caches.key(dep.r)
    with pytest.raises(BadInput, match=f"no volume {profile_caches.VOLUME_PREFIX}{key} here"):
        stack_caches.cache_export(Project(root), key, tmp_path / "x", (dep.head, "img", "p"))
