"""The suite under pytest-xdist (`-n N --dist loadgroup`, what scripts/test.sh runs): which tests share a
worker, and set-up done once per run however many workers ask for it.

Each worker is a process of its own with its own session: a session fixture runs once per worker, a
module fixture once per worker that gets a test of its module. Tests that must not run side by side, or
whose fixtures are too costly to repeat, get one `xdist_group` (one worker, in order):
- an explicit `@pytest.mark.xdist_group("NAME")` on the test (it wins);
- a test in a file (or directory) of FILE_GROUPS: its group;
- a test using a fixture of SHARED_FIXTURES: its group (those fixtures hold something of the machine's,
  not of the test's: a second dockerd and the one system user its sshd lets in);
- a test using a module-scoped fixture: its file's group (the fixture is then set up once, as written —
  several of them up a stack).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# fixture -> group. The second engine is a dockerd per worker (its bridge, data-root, a copy of the base
# image): one is enough. ssh_node rewrites the one `composegen-ssh` user's ~/.ssh for its own sshd and
# engine, so two at once would lock each other out. The installed-tool tests use both engines.
SHARED_FIXTURES = {
    "second_engine": "second-engine",
    "bare_second_engine": "second-engine",
    "ssh_node": "second-engine",
}


# test file (or directory) -> group: tests that see each other through the machine, not through a fixture.
# Every shm reclaim reads all of /proc: the in-flight fds and io_uring rings the hiddenrefs tests hold on
# purpose make any other reclaim refuse, rightly. Exclusive mode refuses a campaign arm while another
# stack holds one of its GPUs, and the campaign tests' profiles share device ids.
FILE_GROUPS = {
    "tests/shm/": "shm-reclaim",
    "tests/campaign/test_campaign_engine.py": "campaign-gpus",
}


def _group_of(item: pytest.Item) -> str | None:
    path = item.nodeid.split("::", 1)[0]
    for prefix, group in FILE_GROUPS.items():
        if path.startswith(prefix):
            return group
    names = set(item.fixturenames)
    for fixture, group in SHARED_FIXTURES.items():
        if fixture in names:
            return group
    info = getattr(item, "_fixtureinfo", None)
    for defs in info.name2fixturedefs.values() if info else ():
        if any(d.scope == "module" for d in defs):
            return item.nodeid.split("::", 1)[0]
    return None


def assign_groups(items: list[pytest.Item]) -> None:
    """Add the implicit xdist_group markers (before xdist reads them: the caller's hook runs tryfirst)."""
    for item in items:
        if item.get_closest_marker("xdist_group") is None and (group := _group_of(item)):
            item.add_marker(pytest.mark.xdist_group(group))


def run_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory all workers of this run share: the parent of the workers' basetemps under xdist."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def once_per_run(
    tmp_path_factory: pytest.TempPathFactory, key: str, make: Callable[[Path], dict]
) -> dict:
    """make(directory) once for the whole run, under a lock; every later caller (any worker) gets the JSON
    it returned. For set-up that the workers can share read-only: a built image, the wheel, the tool."""
    root = run_root(tmp_path_factory)
    done = root / f"{key}.json"
    with _locked(root / f"{key}.lock"):
        if done.is_file():
            return json.loads(done.read_text(encoding="utf-8"))
        work = root / key
        work.mkdir(exist_ok=True)
        value = make(work)
        done.write_text(json.dumps(value), encoding="utf-8")
        return value
