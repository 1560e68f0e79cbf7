"""`status` shows a stack's reviewed mount exceptions (service.unsafe_mounts), on a real engine: the stack
here is only its compose network (what `docker rm -f` leaves), which is enough for status to report it."""

from __future__ import annotations

import json
import subprocess
import uuid

import pytest
import yaml

from tests.support.cli import run_cli
from tests.support.helpers import make_project
from tests.support.profiles import edited

REASON = "the log shipper reads container events"


@pytest.mark.docker
def test_status_shows_the_unsafe_mounts(tmp_path):
    name = f"t-{uuid.uuid4().hex[:8]}"
    sock = {"source": "/var/run/docker.sock", "target": "/var/run/docker.sock", "read_only": True}
    doc = edited(
        (("service", "volumes"), [sock]),
        (("service", "unsafe_mounts"), [{"source": "/var/run/docker.sock", "reason": REASON}]),
    )
    root = make_project(tmp_path, {name: yaml.safe_dump(doc, sort_keys=False)})
    project = f"composegen-{name}"
    network = f"{project}_default"
    label = f"com.docker.compose.project={project}"
    subprocess.run(
        ["docker", "network", "create", "--label", label, network], check=True, capture_output=True
    )
    try:
        res = run_cli("--root", str(root), "status", name, "--json")
        # no container: still reported
        assert res.returncode == 3 and "is not running" in res.stderr, res.stderr
        [stack] = json.loads(res.stdout)["stacks"]
        assert stack["unsafe_mounts"] == [f"/var/run/docker.sock: {REASON}"]
        text = run_cli("--root", str(root), "status", name).stdout
        assert (
            f"{name}: unsafe mount (service.unsafe_mounts) /var/run/docker.sock: {REASON}" in text
        )
    finally:
        subprocess.run(["docker", "network", "rm", network], capture_output=True)
