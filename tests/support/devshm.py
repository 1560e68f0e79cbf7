"""What the tests make in the host's /dev/shm, named so a run finds its own and nobody else's.

Other checkouts (and their test runs) share this machine's /dev/shm, so a test never lists or removes
by a pattern anyone could match: everything made here is `cg-test-<run>-<worker>-<what>-<hex>`,
the run being xdist's test-run id (a fresh one without xdist) hashed with the process id, and the
worker xdist's (`main` without it). `leftovers()` is what this worker of this run left; tests/conftest.py fails the
session when a test left one (and removes it, so the next run starts clean).

A test removes what it made (a fixture's finalizer, a `finally`). Made before any test runs (the aged
leftovers the default --min-age needs: ctime cannot be set back, only real time ages a file) is the
session's: `session_owned` registers it, and the session removes it whether or not its test ran.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import uuid
from pathlib import Path

SHM = Path("/dev/shm")
# the process too: a pytest a test starts (tests/test_engine_env.py) inherits xdist's variables, and
# must neither count nor remove its parent's names
_RUN_OF = f"{os.environ.get('PYTEST_XDIST_TESTRUNUID') or uuid.uuid4().hex}-{os.getpid()}"
RUN = hashlib.sha256(_RUN_OF.encode()).hexdigest()[:8]
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "main")
PREFIX = f"cg-test-{RUN}-{WORKER}-"  # short: the narrow-terminal test prints a path in 80 columns

_session_owned: list[Path] = []


def available() -> bool:
    return SHM.is_dir()


def path_for(what: str) -> Path:
    """A fresh name of this run in /dev/shm (nothing made yet)."""
    return SHM / f"{PREFIX}{what}-{uuid.uuid4().hex[:8]}"


def make_dir(what: str, mode: int = 0o755) -> Path:
    path = path_for(what)
    path.mkdir(mode=mode)
    return path


def session_owned(path: Path) -> Path:
    """PATH (of this run) is removed when the session ends, not by a test."""
    assert path.name.startswith(PREFIX), path
    _session_owned.append(path)
    return path


def remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def remove_session_owned() -> None:
    while _session_owned:
        remove(_session_owned.pop())


def leftovers() -> list[str]:
    """Names this worker of this run has in /dev/shm now."""
    if not available():
        return []
    return sorted(n for n in os.listdir(SHM) if n.startswith(PREFIX))
