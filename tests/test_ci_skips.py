"""Under CI=true a test that skips fails, at run time or by a mark (tests/conftest.py), unless
CI_SKIP_ALLOWED names it: a CI run that silently skipped proves nothing. Without CI a skip is a skip."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from tests.support.ciskips import CI_SKIP_ALLOWED, ci_skip_fails

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
    # the marked one is skipped at set-up, so it counts as an error there
    assert "1 failed" in last and "1 error" in last and "skipped" not in last, last


def test_only_the_allowed_skips_stay_skips_under_ci():
    (allowed,) = CI_SKIP_ALLOWED
    skipped = SimpleNamespace(skipped=True)
    for nodeid, env, fails in [
        (allowed, {"CI": "true"}, False),
        ("tests/edge/test_example.py::test_other", {"CI": "true"}, True),
        ("tests/edge/test_example.py::test_other", {}, False),
    ]:
        assert ci_skip_fails(skipped, SimpleNamespace(nodeid=nodeid), env) is fails, nodeid
    assert (REPO / allowed.split("::")[0]).read_text().count(allowed.split("::")[1]) == 1


def test_without_ci_it_is_a_skip(tmp_path):
    assert "2 skipped" in _run(tmp_path, None)
