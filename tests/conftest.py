"""Shared fixtures. Tests marked `docker` need a real engine: skipped locally when none answers,
but with CI=true a missing engine is a failure, never a skip — and so is any other skip, decided at
run time (`pytest.skip(...)` in a test or a fixture) or by a `skipif` mark, unless the test is in
CI_SKIP_ALLOWED with the reason it may: a CI run that skipped proves nothing."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support import devshm
from tests.support.ciskips import ci_skip_fails
from tests.support.parallel import assign_groups

REPO = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"


def _engine_problem() -> str | None:
    if not shutil.which("docker"):
        return "no docker client on PATH"
    for argv in (
        ["docker", "info", "--format", "{{.ServerVersion}}"],
        ["docker", "compose", "version"],
    ):
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"{' '.join(argv)}: {exc}"
        if proc.returncode != 0:
            return f"{' '.join(argv)}: {proc.stderr.strip()[:200]}"
    return None


# A run started in the background of a non-interactive shell inherits SIGINT ignored (under nohup,
# SIGHUP too), and so would every composegen the tests start: their Ctrl-C and hang-up tests would then
# wait in vain, or see the ignored signal kept ignored as it should be. Tests start from the defaults,
# as a terminal gives them.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the xdist_group markers
def pytest_collection_modifyitems(config, items):
    assign_groups(items)
    if not any("docker" in item.keywords for item in items):
        return
    problem = _engine_problem()
    if problem is None:
        return
    if os.environ.get("CI") == "true":
        # Fail, never skip: a CI run that silently skipped the engine tests proves nothing.
        for item in items:
            if "docker" in item.keywords:
                item.add_marker(pytest.mark.usefixtures("_require_engine"))
        return
    skip = pytest.mark.skip(reason=f"docker engine unavailable: {problem}")
    for item in items:
        if "docker" in item.keywords:
            item.add_marker(skip)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if ci_skip_fails(report, item, os.environ):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = (
            f"CI=true: a test may not skip ({reason}); if it must, add it to CI_SKIP_ALLOWED in "
            "tests/support/ciskips.py with the reason"
        )


@pytest.fixture(scope="session", autouse=True)
def _private_cache_dir(tmp_path_factory):
    """composegen's own caches (rendercache.py) go to a directory of this test session, never the user's
    (under xdist: of this worker, a process of its own, so the environment change stays in it)."""
    previous = os.environ.get("COMPOSEGEN_CACHE_DIR")
    os.environ["COMPOSEGEN_CACHE_DIR"] = str(tmp_path_factory.mktemp("composegen-cache"))
    yield
    if previous is None:
        os.environ.pop("COMPOSEGEN_CACHE_DIR", None)
    else:
        os.environ["COMPOSEGEN_CACHE_DIR"] = previous


@pytest.fixture(scope="session", autouse=True)
def _dev_shm_left_clean():
    """The host's /dev/shm holds nothing of this run when its tests are done: a test that made something
    there and left it fails the session, naming it (removed here all the same). Only this run's own names
    count (tests/support/devshm.py): other checkouts share the machine."""
    yield
    devshm.remove_session_owned()
    left = devshm.leftovers()
    for name in left:
        devshm.remove(devshm.SHM / name)
    assert not left, f"tests left these in /dev/shm (removed now): {left}"


def pytest_sessionfinish(session):
    # also in an xdist worker that ran no test (so never set up the fixture above)
    devshm.remove_session_owned()


@pytest.fixture
def _require_engine():
    problem = _engine_problem()
    if problem:
        pytest.fail(f"CI=true and the docker engine is unavailable: {problem}")


@pytest.fixture
def repo_root() -> Path:
    return REPO


@pytest.fixture
def data_dir() -> Path:
    return DATA


@pytest.fixture
def shm_dir():
    """A directory of this run on the host's tmpfs, removed after the test."""
    if not devshm.available():
        pytest.skip("no /dev/shm on this machine")
    path = devshm.make_dir("dir")
    yield path
    devshm.remove(path)


@pytest.fixture
def holders():
    """Start python processes that set files up, print lines, then block until stdin closes."""
    started = []

    def start(script: str, directory: Path) -> tuple[subprocess.Popen, list[str]]:
        code = (
            "import os, sys, mmap, time\nD = sys.argv[1]\n"
            + textwrap.dedent(script)
            + "\nprint('ready', flush=True)\nsys.stdin.read()\n"
        )
        proc = subprocess.Popen(
            [sys.executable, "-c", code, str(directory)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        started.append(proc)
        lines = []
        while (line := proc.stdout.readline().strip()) != "ready":
            assert line, f"holder exited early (rc {proc.poll()})"
            lines.append(line)
        return proc, lines

    yield start
    for proc in started:
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
