"""scripts/setup.sh on a fresh checkout with no package index in reach: it asks the index once and fails
in one line naming it, within seconds — not 151 s of pip retries and 66 warnings."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

from tests.support.helpers import REPO


def test_setup_without_a_package_index_fails_fast_in_one_line(tmp_path):
    clone = tmp_path / "clone"
    (clone / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "setup.sh", clone / "scripts" / "setup.sh")
    shutil.copy(REPO / "pyproject.toml", clone / "pyproject.toml")
    index = "http://127.0.0.1:9/simple"  # the discard port: nothing answers
    env = {
        **os.environ,
        # no configured mirrors or wheelhouses: offline as a bare box is
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_INDEX_URL": index,
        "PIP_EXTRA_INDEX_URL": "",
        "PIP_FIND_LINKS": "",
        # Debian's python3 first
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    }
    began = time.monotonic()
    res = subprocess.run(
        ["bash", "scripts/setup.sh"],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    took = time.monotonic() - began
    assert res.returncode == 1, res.stderr
    errors = [line for line in res.stderr.splitlines() if "error" in line.lower()]
    assert errors == [
        f"setup: error: the package index {index} does not answer (pip cannot install composegen's "
        "dependencies); connect, or point PIP_INDEX_URL or PIP_FIND_LINKS at a mirror or wheelhouse"
    ]
    assert "Retrying" not in res.stderr and "WARNING" not in res.stderr, res.stderr
    assert took < 90, took  # venv creation plus one 10 s question, on a busy machine
    assert not (clone / ".venv" / ".composegen-install").exists()  # nothing was installed
