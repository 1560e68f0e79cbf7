"""Every engine test works on the engine its caller names. A sample of them (compose with a child env, the
CLI's `up` in a tmux terminal, a plain `docker run`) runs in a pytest subprocess whose DOCKER_HOST is a
second engine and whose default socket is masked (a private mount namespace binds /dev/null over it): a
test that drops DOCKER_HOST, or a tmux pane that takes another caller's environment, fails there instead
of creating its containers on the machine's default engine. The default engine's own events then show
none of the sample's containers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.helpers import REPO
from tests.support.second_engine import second_engine  # noqa: F401  (the session fixture)

pytestmark = pytest.mark.docker

SAMPLE = [
    "tests/profiles/test_profile_property.py::test_dollar_text_reaches_the_container_as_written",
    "tests/cli/test_terminal_progress.py::test_up_in_a_terminal_draws_one_block_that_never_wraps_and_shows_every_stage[80]",
    "tests/shm/test_shm_engine.py::test_container_shm_reads_a_private_dev_shm_from_the_host",
]
DEFAULT_SOCKETS = [p for p in ("/run/docker.sock", "/var/run/docker.sock") if Path(p).is_socket()]


def _created(since: float, until: float, host: str | None = None) -> list[dict]:
    """The attributes of every container created on one engine (the caller's when host is None) in a window."""
    argv = [
        "docker",
        *(["-H", host] if host else []),
        "events",
        "--since",
        f"{since:.3f}",
        "--until",
        f"{until:.3f}",
    ]
    argv += [
        "--filter",
        "type=container",
        "--filter",
        "event=create",
        "--format",
        "{{json .Actor.Attributes}}",
    ]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return [json.loads(line) for line in res.stdout.splitlines() if line.strip()]


def test_a_sample_of_engine_tests_runs_on_the_second_engine_only(second_engine, tmp_path):  # noqa: F811
    if shutil.which("unshare") is None or not DEFAULT_SOCKETS:
        pytest.skip("needs unshare(1) and a default engine socket to mask")
    mask = " && ".join(f"mount --bind /dev/null {p}" for p in DEFAULT_SOCKETS)
    env = {**os.environ, "DOCKER_HOST": second_engine.url, "CI": "true"}
    env.pop("DOCKER_CONTEXT", None)  # DOCKER_HOST alone names the engine here
    argv = [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        f'{mask} && exec "$@"',
        "sh",
    ]
    argv += [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "--basetemp",
        str(tmp_path / "b"),
        *SAMPLE,
    ]
    since = time.time()
    res = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    until = time.time() + 1
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    assert f"{len(SAMPLE)} passed" in res.stdout, res.stdout[-2000:]
    on_second = {a["name"] for a in _created(since, until, second_engine.url)}
    # the sample really created its containers there
    assert len(on_second) >= len(SAMPLE), on_second
    on_default = {a["name"] for a in _created(since, until)}
    assert not on_second & on_default, on_second & on_default
