"""`edge up` with a door port already taken: the door's Caddy binds 127.0.0.1:PORT in the host's network
and would restart forever (the CI failure this guards: `docker exec …: Container … is restarting`), so the
edge refuses before it starts anything, naming the port, its holder and the field that moves it."""

from __future__ import annotations

import os
import socket
import subprocess

import pytest

from tests.support.edge import edge_project
from tests.support.engine import force_remove

pytestmark = pytest.mark.docker


def test_edge_up_refuses_a_taken_door_port_and_names_its_holder(tmp_path, edge_img):
    edge = edge_project(tmp_path, edge_img)
    with socket.socket() as held:
        held.bind(("127.0.0.1", edge.ports[edge.new]))
        held.listen()
        try:
            res = edge.cli("edge", "up", timeout=120)
            assert res.returncode == 3, res.stderr
            first = res.stderr.splitlines()[0]
            assert f"127.0.0.1:{edge.ports[edge.new]} is in use" in first
            assert f"held by pid {os.getpid()}" in first
            assert f"`service.port.host` in profiles/{edge.new}.yaml sets another port" in first
            # nothing started: no door restarting in the background
            status = edge.cli("edge", "status")
            assert f"composegen-{edge.name}-door" not in status.stdout
        finally:
            force_remove(f"composegen-{edge.name}")
    # the same project comes up once the port is free; a door that stopped is checked again
    try:
        edge.ok("edge", "up")
        door = f"composegen-{edge.name}-door-1"
        subprocess.run(["docker", "stop", "-t", "1", door], check=True, capture_output=True)
        with socket.socket() as held:
            held.bind(("127.0.0.1", edge.metrics_port))
            held.listen()
            res = edge.cli("edge", "up", timeout=120)
        assert res.returncode == 3, res.stderr
        assert f"127.0.0.1:{edge.metrics_port} is in use" in res.stderr
        assert "`metrics.port` in edge.yaml sets another port" in res.stderr
    finally:
        edge.cli("edge", "down")
        force_remove(f"composegen-{edge.name}")
