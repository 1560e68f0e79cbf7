"""`render --check` from the render cache: the same answer as the real check for the same inputs, without
importing the renderer; any changed input misses and the real check runs; a record cannot be planted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from composegen import rendercache, usercache
from tests.support.cli import run_cli
from tests.support.helpers import MINIMAL, make_project


def check(root: Path, env: dict | None = None) -> tuple[subprocess.CompletedProcess, bool]:
    """`render --check` in a fresh interpreter, and whether it imported the renderer (a cache miss)."""
    res = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            "-m",
            "composegen",
            "--root",
            str(root),
            "render",
            "--check",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=120,
    )
    imported = {
        line.rsplit("|", 1)[-1].strip()
        for line in res.stderr.splitlines()
        if line.startswith("import time:")
    }
    rendered = "composegen.render" in imported
    return res, rendered


@pytest.fixture
def fresh(tmp_path) -> Path:
    root = make_project(tmp_path, {"tiny": MINIMAL})
    assert run_cli("--root", str(root), "render").returncode == 0
    return root


def test_second_check_is_answered_without_rendering_and_says_the_same(fresh):
    cold, cold_rendered = check(fresh)
    warm, warm_rendered = check(fresh)
    assert cold.returncode == warm.returncode == 0
    assert cold.stdout == warm.stdout == "out/ is fresh (1 files)\n"
    assert cold_rendered and not warm_rendered


@pytest.mark.parametrize(
    "change",
    [
        "profile edited",
        "out file edited",
        "out file added",
        "profile added",
        "top-level file added",
        "env changed",
    ],
)
def test_any_changed_input_misses_and_the_real_check_answers(fresh, change):
    check(fresh)  # the record
    env = {}
    if change == "profile edited":
        path = fresh / "profiles/tiny.yaml"
        path.write_text(path.read_text().replace("max-num-seqs: 4", "max-num-seqs: 5"))
    elif change == "out file edited":
        path = fresh / "out/tiny/compose.yaml"
        path.write_text(path.read_text() + "# hand edit\n")
    elif change == "out file added":
        (fresh / "out/ghost").mkdir()
        (fresh / "out/ghost/compose.yaml").write_text("name: x\n")
    elif change == "profile added":
        (fresh / "profiles/other.yaml").write_text(MINIMAL.replace("host: 39999", "host: 39998"))
    elif change == "top-level file added":
        (fresh / "NOTES.md").write_text("read by nothing: still an input\n")
    else:
        env = {"COMPOSEGEN_SOMETHING": "1"}
    res, rendered = check(fresh, env)
    assert rendered, f"{change}: answered from the cache"
    stale = change in ("profile edited", "out file edited", "out file added", "profile added")
    assert res.returncode == (1 if stale else 0), res.stdout + res.stderr


def test_a_forged_or_foreign_record_is_never_believed(fresh):
    check(fresh)
    record_path = next((usercache.cache_dir() / rendercache.KIND).glob("*.json"))
    path = fresh / "out/tiny/compose.yaml"
    path.write_text(path.read_text() + "# stale now\n")
    record = json.loads(record_path.read_text())
    record["fingerprint"] = "0" * 64  # a record that does not match these inputs
    record_path.write_text(json.dumps(record))
    res, rendered = check(fresh)
    assert rendered and res.returncode == 1
    # A record committed inside the project is never read: the cache lives outside it.
    (fresh / ".composegen").mkdir(exist_ok=True)
    (fresh / ".composegen/render-check.json").write_text(json.dumps({**record, "fingerprint": "x"}))
    res, rendered = check(fresh)
    assert rendered and res.returncode == 1


def test_linked_input_is_left_to_the_real_check(fresh, tmp_path):
    check(fresh)
    outside = tmp_path / "elsewhere.yaml"
    outside.write_text("x: 1\n")
    (fresh / "profiles/linked.yaml").symlink_to(outside)
    assert rendercache.fingerprint(fresh) is None
    _, rendered = check(fresh)
    assert rendered


@pytest.mark.parametrize("make", ["link", "directory"])
def test_a_top_level_yaml_that_is_no_regular_file_is_left_to_the_real_check(fresh, make):
    check(fresh)
    scope = fresh / "composegen.yaml"
    scope.symlink_to(fresh / "profiles/tiny.yaml") if make == "link" else scope.mkdir()
    assert rendercache.fingerprint(fresh) is None
    res, rendered = check(fresh)
    assert rendered and res.returncode == 2 and "composegen.yaml" in res.stderr, res.stderr


def test_package_code_is_an_input(tmp_path, monkeypatch):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "render.py").write_text("A = 1\n")
    root = make_project(tmp_path / "p", {"tiny": MINIMAL})
    monkeypatch.setattr(rendercache, "PACKAGE_DIR", package)
    before = rendercache.fingerprint(root)
    (package / "render.py").write_text("A = 2\n")
    assert before is not None and rendercache.fingerprint(root) != before


def test_disabled_by_environment(fresh):
    check(fresh)
    _, rendered = check(fresh, {"COMPOSEGEN_NO_CACHE": "1"})
    assert rendered
