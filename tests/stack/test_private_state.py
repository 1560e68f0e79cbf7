"""Files composegen writes for itself — .composegen/ (emulator overrides, locks), runs/ bundles and the
crash log — are private (0600 files, 0700 directories) even under a permissive umask, and never written
through a symbolic link."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from composegen import privatestate
from composegen.errors import BadInput
from composegen.profiles import resolve
from composegen.project import Project
from composegen.stack import emulate
from tests.support.cli import run_cli
from tests.support.helpers import REPO


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture
def open_umask():
    # the usual default: files 0644, directories 0755 unless asked otherwise
    previous = os.umask(0o022)
    yield
    os.umask(previous)


@pytest.fixture
def project(tmp_path):
    shutil.copytree(REPO / "profiles", tmp_path / "profiles")
    return Project(tmp_path)


def test_the_emulator_override_and_the_lock_are_private(project, open_umask):
    r = resolve.load(project, "4096-131k")
    path = emulate.write_override(project, r, "composegen/vllm-emulator:x", {})
    assert path == emulate.override_path(project, r.name)
    assert _mode(path) == 0o600
    assert _mode(path.parent) == _mode(project.root / ".composegen") == 0o700
    with privatestate.profile_lock(project, r.name):
        lock = project.root / ".composegen" / "locks" / f"{r.name}.lock"
        assert _mode(lock) == 0o600 and _mode(lock.parent) == 0o700
        # who holds it, for a waiting run to name
        assert lock.read_text().strip() == str(os.getpid())


def test_a_symlink_in_the_state_directory_is_refused_not_followed(project, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (project.root / ".composegen").mkdir()
    (project.root / ".composegen" / "4096-131k").symlink_to(elsewhere)
    r = resolve.load(project, "4096-131k")
    with pytest.raises(BadInput, match="is a symbolic link"):
        emulate.write_override(project, r, "img", {})
    assert list(elsewhere.iterdir()) == []


def test_a_rewritten_file_keeps_private_mode(project, open_umask):
    target = privatestate.state_dir(project, "x") / "f.yaml"
    target.write_text("old")
    target.chmod(0o644)
    privatestate.write(target, "new")
    assert target.read_text() == "new" and _mode(target) == 0o600


def test_an_evidence_bundle_is_private(project, open_umask):
    log = REPO / "tests/data/logs/vllm-0.33.0-r33-4096-arm.log"
    res = run_cli(
        "--root",
        str(project.root),
        "evidence",
        "--from-log",
        str(log),
        "--profile",
        "4096-131k",
        "--json",
    )
    assert res.returncode == 0, res.stderr
    bundle = project.root / json.loads(res.stdout)["path"]
    assert _mode(project.root / "runs") == 0o700 and _mode(bundle) == 0o700
    files = list(bundle.iterdir())
    assert files and all(_mode(f) == 0o600 for f in files)


def test_the_crash_log_is_private(tmp_path, monkeypatch, open_umask):
    from composegen.cli import exits

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    old = tmp_path / "cache" / "composegen" / "crash.log"
    old.parent.mkdir(parents=True)
    old.write_text("an older crash")
    old.chmod(0o644)

    def broken() -> int:
        raise RuntimeError("boom")

    assert exits.run(broken) == 3
    assert "RuntimeError: boom" in old.read_text()
    assert _mode(old) == 0o600


def test_private_state_has_one_home():
    """One private_dir, one stamp format, and the edge's keys load without the stack room (issue 41)."""
    import ast
    import subprocess
    import sys

    package = REPO / "composegen"
    defined = [
        f"{path.relative_to(package)}:{node.name}"
        for path in package.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef)
        and node.name in ("private_dir", "now_iso", "now_utc", "iso")
    ]
    assert defined == ["privatestate.py:private_dir"]
    stamp_formats = {
        line.strip()
        for path in package.rglob("*.py")
        if "emulator" not in path.parts
        for line in path.read_text().splitlines()
        if "%H:%M:%S" in line
    }
    assert stamp_formats == {'STAMP_FORMAT = "%Y-%m-%dT%H:%M:%SZ"'}, stamp_formats
    code = "import sys, composegen.edge.keys; print(sum(m.startswith('composegen') for m in sys.modules))"
    loaded = int(
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
    )
    assert loaded <= 10


def test_a_stamp_read_back_is_checked():
    assert privatestate.parse_stamp(privatestate.stamp()) is not None
    for bad in ("2026-12-03T10:00:00", "garbage", 17, None, "9" * 100):
        assert privatestate.parse_stamp(bad) is None
