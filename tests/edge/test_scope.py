"""composegen.yaml's scope (issue 51 #3): a second copy of a project on one engine by one field. With it,
every compose project (the stacks', the edge's and its network) is SCOPE-…, every container_name gets
SCOPE- in front and every host port (the stacks', Prometheus', the edge's listener and metrics door) moves
by port_offset; `render --check` holds it. Without it, out/ is what it always was (the golden files and
tests/edge/test_example.py's fresh example). Bad input is one line naming composegen.yaml:line and field,
exit 2, nothing written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from composegen.profiles.schema import Scope
from composegen.project import Project, compose_project
from composegen.stack import status
from tests.edge.test_edge_config import GOOD
from tests.edge.test_edge_config import project as edge_project
from tests.support.cli import assert_no_crash, run_cli, run_inproc
from tests.support.profiles import BASE, edited, project
from tests.test_fuzz_inputs import FUZZ, VALUES

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "team-edge"
STACKS = ("r33", "8192-131k", "4096-131k", "sb-8192", "sb-4096")


def _compose(root: Path, key: str) -> dict:
    return yaml.safe_load((root / "out" / key / "compose.yaml").read_text(encoding="utf-8"))


def test_one_field_scopes_every_name_and_port_of_the_example(tmp_path):
    root = tmp_path / "second"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("runs", ".composegen"))
    (root / "composegen.yaml").write_text("scope: {name: alice, port_offset: 100}\n")
    stale = run_cli("--root", str(root), "render", "--check")
    assert stale.returncode == 1, stale.stdout + stale.stderr  # out/ carries the scope
    assert run_cli("--root", str(root), "render").returncode == 0
    fresh = run_cli("--root", str(root), "render", "--check")
    assert fresh.returncode == 0 and "out/ is fresh" in fresh.stdout, fresh.stdout + fresh.stderr
    for name in STACKS:
        shipped, mine = _compose(EXAMPLE, name), _compose(root, name)
        was, now = shipped["services"]["vllm"], mine["services"]["vllm"]
        assert (shipped["name"], mine["name"]) == (f"composegen-{name}", f"alice-{name}")
        assert now["container_name"] == f"alice-{was['container_name']}"
        bind, port, inner = was["ports"][0].split(":")
        assert now["ports"] == [f"{bind}:{int(port) + 100}:{inner}"]
    edge = _compose(root, "edge")
    assert edge["name"] == "alice-edge" and edge["networks"]["edge"]["name"] == "alice-edge-net"
    assert edge["services"]["proxy"]["ports"] == ["127.0.0.1:39543:8443"]
    overlay = (root / "out/edge/stacks/4096-131k.yaml").read_text()  # `!reset`: not for safe_load
    assert 'name: "alice-edge-net"' in overlay and "composegen-" not in overlay
    doors = (root / "out/edge/door.Caddyfile").read_text()
    assert "http://:39590 {" in doors and "http://:39171 {" in doors and ":39490" not in doors
    shown = json.loads(run_cli("--root", str(root), "show", "4096-131k", "--json").stdout)
    assert shown["profile"]["service"]["port"]["host"] == 39171, shown["profile"]["service"]
    # `status` takes the scope's projects as this project's (a stack whose containers are gone)
    here = Project(root)
    assert status._profile_of_project(here, "alice-4096-131k") == "4096-131k"
    assert status._profile_of_project(here, "composegen-4096-131k") == "composegen-4096-131k"


def test_prometheus_port_moves_too(tmp_path):
    root = project(tmp_path, edited((("monitoring",), {"prometheus": True, "port": 9090})))
    (root / "composegen.yaml").write_text("scope:\n  name: b\n  port_offset: -1000\n")
    assert run_inproc("--root", str(root), "render").returncode == 0
    services = _compose(root, "p")["services"]
    assert services["prometheus"]["ports"] == ["127.0.0.1:8090:9090"]
    assert (
        services["vllm"]["ports"] == ["127.0.0.1:38999:8000"]
        and _compose(root, "p")["name"] == "b-p"
    )


MOVES = "composegen.yaml:1: scope.port_offset:"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("scope: {name: Alice}\n", "composegen.yaml:1: scope.name: String should match pattern"),
        ("scope: {name: a.b}\n", "composegen.yaml:1: scope.name: String should match pattern"),
        ("scope: {name: a-b}\n", "composegen.yaml:1: scope.name: String should match pattern"),
        ("scope:\n  name: composegen\n", "composegen.yaml:2: scope.name: composegen names the unscoped"),
        ("scope: {name: alice, colour: x}\n", "composegen.yaml:1: scope.colour: unknown key"),
        ("scope: {name: a, prot_offset: 1}\n", "composegen.yaml:1: scope.prot_offset: unknown key (did you mean"),
        ("scope:\n  name: a\n  port_offset: '100'\n", "composegen.yaml:3: scope.port_offset: Input should be"),
        ("scope: {name: a, port_offset: 70000}\n", "composegen.yaml:1: scope.port_offset: Input should be less than"),
        ("scope: {name: a, port_offset: 30000}\n", f"{MOVES} 30000 moves profiles/"),
        ("scope: {name: a, port_offset: -38590}\n", f"{MOVES} -38590 moves profiles/"),
        ("scope:\n  name: a\n  port_offset: -38500\n", "yaml:3: scope.port_offset: -38500 moves edge.yaml's metrics"),
        ("scope: {name: a}\nscope: {name: b}\n", "composegen.yaml:2: scope: duplicate key"),
        ("{}\n", "composegen.yaml:1: scope: a map"),
        ("scope: {}\n", "composegen.yaml:1: scope.name: required key is missing"),
        ("", "composegen.yaml:1: scope: a map"),
        ("- scope\n", "composegen.yaml:1: scope: a map"),
    ],
)  # fmt: skip
def test_bad_composegen_yaml_is_one_line_naming_file_line_and_field(tmp_path, text, message):
    root = edge_project(tmp_path, GOOD)
    (root / "composegen.yaml").write_text(text, encoding="utf-8")
    res = run_cli("--root", str(root), "render")
    assert res.returncode == 2, res.stdout + res.stderr
    assert message in res.stderr and "Traceback" not in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) <= 2, res.stderr  # the line, at most a hint
    assert not (root / "out").exists()  # bad input writes nothing


def test_scope_names_never_share_a_compose_project():
    """With '-' in a scope, scope a-b's foo and scope a's b-foo were one project."""
    assert compose_project("b-foo", None, "a") != compose_project("foo", None, "a_b")
    for bad in ("a-b", "composegen-a"):
        with pytest.raises(ValidationError):
            Scope(name=bad)


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda p: p.symlink_to("edge.yaml"), "a symbolic link; composegen.yaml is a regular file at the project root"),
        (lambda p: p.mkdir(), "not a regular file; composegen.yaml is a regular file at the project root"),
        (lambda p: p.write_bytes(b"\xff\xfe"), "composegen.yaml: not UTF-8 text"),
        (lambda p: p.write_bytes(b"#" * (2 << 20)), "composegen.yaml: larger than 1 MiB; not a project file"),
        (lambda p: p.write_text("scope: &s {name: a}\nx: *s\n"), "aliases (*name) are not supported\n"),
        (lambda p: p.write_text("scope:\n  <<: {name: a}\n"), "merge keys (<<) are not supported\n"),
    ],
)  # fmt: skip
def test_a_bad_composegen_yaml_file_is_named_as_itself_not_as_a_profile(tmp_path, make, said):
    root = edge_project(tmp_path, GOOD)
    make(root / "composegen.yaml")
    res = run_inproc("--root", str(root), "render")
    assert res.returncode == 2 and said in res.stderr, res.stderr
    assert "profile" not in res.stderr and "extends" not in res.stderr, res.stderr


KEYS = st.sampled_from(["name", "port_offset", "x"])
GOOD_SHAPE = {"name": st.text(max_size=8), "port_offset": st.integers(-70000, 70000)}
SCOPES = st.one_of(
    VALUES,
    st.fixed_dictionaries({"scope": st.dictionaries(KEYS, VALUES)}),
    st.fixed_dictionaries({"scope": st.fixed_dictionaries(GOOD_SHAPE)}),
)


@FUZZ
@given(doc=SCOPES)
def test_fuzzed_composegen_yaml(tmp_path_factory, doc):
    root = project(tmp_path_factory.mktemp("sc"), BASE)
    (root / "composegen.yaml").write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
    for args in (["validate"], ["render"], ["show", "p", "--json"], ["diff", "p", "p"]):
        assert_no_crash(run_inproc("--root", str(root), *args))
