"""`up`'s out/NAME freshness check from the render cache (rendercache.stack_fresh): recorded only after the
real comparison found the stack fresh, and any changed input — out/ or the profile — is compared again."""

from __future__ import annotations

import pytest

from composegen import rendercache
from composegen.errors import CheckFailed
from composegen.profiles import resolve
from composegen.project import find_project
from composegen.stack import placement, prepare
from tests.support.cli import run_cli
from tests.support.helpers import MINIMAL, make_project


@pytest.fixture
def rendered(tmp_path):
    root = make_project(tmp_path, {"tiny": MINIMAL})
    assert run_cli("--root", str(root), "render").returncode == 0
    return root


def fresh_check(root) -> None:
    project = find_project(str(root))
    prepare.ensure_fresh(
        placement.deployment(project, resolve.load(project, "tiny")), render_stale=False
    )


def test_recorded_only_once_the_real_comparison_passed(rendered):
    assert not rendercache.stack_fresh(rendered, "tiny")
    fresh_check(rendered)
    assert rendercache.stack_fresh(rendered, "tiny")


@pytest.mark.parametrize("change", ["out file edited", "profile edited"])
def test_a_changed_input_is_compared_again(rendered, change):
    fresh_check(rendered)
    if change == "out file edited":
        path = rendered / "out/tiny/compose.yaml"
        path.write_text(path.read_text() + "# hand edit\n")
    else:
        path = rendered / "profiles/tiny.yaml"
        path.write_text(path.read_text().replace("max-num-seqs: 4", "max-num-seqs: 5"))
    assert not rendercache.stack_fresh(rendered, "tiny")
    with pytest.raises(CheckFailed, match=r"out/tiny/compose\.yaml is stale"):
        fresh_check(rendered)


def test_no_record_without_the_cache(rendered, monkeypatch):
    monkeypatch.setenv("COMPOSEGEN_NO_CACHE", "1")
    fresh_check(rendered)
    monkeypatch.delenv("COMPOSEGEN_NO_CACHE")
    assert not rendercache.stack_fresh(rendered, "tiny")
