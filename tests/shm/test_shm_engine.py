"""composegen.shm.scan against real containers: --ipc host leftovers after `docker kill`, and a private /dev/shm."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from composegen.cli.fastpath import ContainerLabels
from composegen.errors import BadInput
from composegen.shm import scan as shm
from composegen.shm.reports import ShmScan
from composegen.stack import engine
from tests.support import devshm
from tests.support.helpers import run_cli
from tests.support.shmreclaim import settled_reclaim

pytestmark = pytest.mark.docker

BASE_IMAGE = os.environ.get("COMPOSEGEN_BASE_IMAGE", "composegen/base:py3")

# Creates two psm_ files in SHM_DIR (the container's /dev/shm/<prefix>), maps them, then waits.
HOLDER = """
import mmap, os, sys, time
d, tag = sys.argv[1], sys.argv[2]
os.makedirs(d, exist_ok=True)
maps = []
for i in range(2):
    with open(os.path.join(d, f"psm_{tag}{i}"), "w+b") as f:
        f.truncate(65536)
        maps.append(mmap.mmap(f.fileno(), 65536))
        maps[-1][:5] = b"hello"
open(os.path.join(d, f"ready-{tag}"), "w").close()
time.sleep(3600)
"""


def _docker(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=120, check=check
    )


@pytest.fixture(scope="module")
def base_image():
    if _docker("image", "inspect", BASE_IMAGE, check=False).returncode != 0:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{BASE_IMAGE} is missing: run scripts/provision.sh")
        pytest.skip(f"{BASE_IMAGE} is missing: run scripts/provision.sh")
    return BASE_IMAGE


@pytest.fixture
def containers():
    names = []

    def run(name: str, *docker_args: str, command: list[str]) -> str:
        names.append(name)
        return _docker("run", "-d", "--name", name, *docker_args, *command).stdout.strip()

    yield run
    for name in names:
        _docker("rm", "-f", name, check=False)


def _wait_for(predicate, what: str, timeout: float = 30.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}")


def _by_name(report: ShmScan | dict) -> dict:
    """Entries by name, as the JSON has them."""
    doc = report.to_json() if isinstance(report, ShmScan) else report
    return {e["name"]: e for e in doc["entries"]}


def test_killed_host_ipc_container_leaves_leftovers_that_reclaim_frees(base_image, containers):
    prefix = f"composegen-engine-{uuid.uuid4().hex[:8]}"
    host_dir = devshm.path_for(
        "engine"
    )  # the containers make it: ipc host shares the host's /dev/shm
    try:
        ids = {}
        for tag in ("a", "b"):
            ids[tag] = containers(
                f"{prefix}-{tag}",
                "--ipc",
                "host",
                "--label",
                f"com.docker.compose.project={prefix}",
                "--label",
                f"io.composegen.profile=profile-{tag}",
                base_image,
                command=["python3", "-c", HOLDER, str(host_dir), tag],
            )
        _wait_for(
            lambda: all((host_dir / f"ready-{t}").exists() for t in "ab"), "both holders ready"
        )

        before = _by_name(shm.scan(str(host_dir), container_labels=ContainerLabels()))
        for tag in "ab":
            for i in range(2):
                entry = before[f"psm_{tag}{i}"]
                assert entry["class"] == "in-use" and entry["allocated_bytes"] >= 4096
                [holder] = entry["holders"]
                assert holder["container_id"] == ids[tag] and holder["compose_project"] == prefix
                assert holder["composegen_profile"] == f"profile-{tag}" and "map" in holder["how"]

        # The CLI's fast path imports the engine only now that a holder is in a container.
        fast = json.loads(run_cli("shm", "--json", "--path", str(host_dir)).stdout)
        assert {h["compose_project"] for e in fast["entries"] for h in e["holders"]} == {prefix}

        _docker("kill", f"{prefix}-a")
        _docker("wait", f"{prefix}-a")
        after = _by_name(shm.scan(str(host_dir), container_labels=ContainerLabels()))
        assert [after[f"psm_a{i}"]["class"] for i in range(2)] == ["leftover", "leftover"]
        assert [after[f"psm_b{i}"]["class"] for i in range(2)] == ["in-use", "in-use"]

        # PID 1 of some hosts (and of this sandbox) cannot be read even by root: accept that here.
        done = settled_reclaim(str(host_dir), yes=True, ignore_unreadable=True, min_age=0).to_json()
        assert sorted(r["name"] for r in done["removed"]) == ["psm_a0", "psm_a1"]
        assert (
            done["bytes_freed"]
            == after["psm_a0"]["allocated_bytes"] + after["psm_a1"]["allocated_bytes"]
        )
        assert sorted(os.listdir(host_dir)) == ["psm_b0", "psm_b1", "ready-a", "ready-b"]
        still = _by_name(shm.scan(str(host_dir), container_labels=ContainerLabels()))
        assert still["psm_b0"]["holders"][0]["container_id"] == ids["b"]
    finally:
        shutil.rmtree(host_dir, ignore_errors=True)


def test_container_shm_reads_a_private_dev_shm_from_the_host(base_image, containers):
    name = f"composegen-private-{uuid.uuid4().hex[:8]}"
    cid = containers(
        name,
        "--ipc",
        "private",
        "--shm-size",
        "8m",
        base_image,
        command=["python3", "-c", HOLDER, "/dev/shm", "p"],
    )
    _wait_for(
        lambda: "ready-p" in _docker("exec", name, "ls", "/dev/shm").stdout, "private holder ready"
    )
    model = shm.container_shm(name, inspect=engine.shm_facts, container_labels=ContainerLabels())
    assert (
        isinstance(model, ShmScan) and model.container is not None and model.container.name == name
    )
    report = model.to_json()
    assert report["container"]["id"] == cid and report["container"]["ipc_mode"] == "private"
    assert report["filesystem"]["total_bytes"] == 8 * 1024 * 1024
    entries = _by_name(report)
    assert (
        entries["psm_p0"]["class"] == "in-use"
        and entries["psm_p0"]["holders"][0]["container_id"] == cid
    )
    assert not (Path("/dev/shm") / "psm_p0").exists()  # it really was the container's own tmpfs


def test_container_shm_of_an_unknown_container_is_bad_input(base_image):
    with pytest.raises(BadInput, match="no such container"):
        shm.container_shm(f"composegen-missing-{uuid.uuid4().hex[:8]}", inspect=engine.shm_facts)
