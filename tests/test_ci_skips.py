"""Under CI=true a test that skips at run time fails (tests/conftest.py): a CI run that silently
skipped proves nothing. A skip mark still skips; without CI a runtime skip is a skip."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROBE = """
import pytest

def test_skips_at_run_time():
    pytest.skip("no such thing here")

@pytest.mark.skip(reason="marked")
def test_marked():
    pass
"""


def _run(tmp_path: Path, ci: str | None) -> str:
    probe = REPO / "tests" / f"test_zz_ci_probe_{os.getpid()}_{tmp_path.name}.py"
    probe.write_text(PROBE)
    env = {k: v for k, v in os.environ.items() if k != "CI"} | ({"CI": ci} if ci else {})
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "-p",
                "no:xdist",
                str(probe),
            ],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        probe.unlink()
    return done.stdout.strip().splitlines()[-1]


def test_a_runtime_skip_fails_under_ci(tmp_path):
    last = _run(tmp_path, "true")
    assert "1 failed" in last and "1 skipped" in last, last


def test_without_ci_it_is_a_skip(tmp_path):
    assert "2 skipped" in _run(tmp_path, None)
