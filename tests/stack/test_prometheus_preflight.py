"""`monitoring: {prometheus: true}` is checked before anything starts: the Prometheus image (pulled by
preflight, even with --emulate) and its host port, each a FAIL line of its own said once, naming the
field to change."""

from __future__ import annotations

import socket

import pytest

from tests.support.cli import run_cli
from tests.support.engine import emulated_project, force_remove, free_port, project_leftovers

pytestmark = pytest.mark.docker


def test_an_unpullable_prometheus_image_and_a_held_port_fail_preflight_once_each(tmp_path):
    root, name, _ = emulated_project(tmp_path)
    registry = f"127.0.0.1:{free_port()}"  # nothing listens: the engine's pull is refused, locally
    image = f"{registry}/prom/prometheus@sha256:{'a' * 64}"
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        path = root / "profiles" / f"{name}.yaml"
        path.write_text(
            path.read_text() + f"monitoring: {{prometheus: true, port: {port}, image: '{image}'}}\n"
        )
        assert run_cli("--root", str(root), "render", name).returncode == 0
        try:
            res = run_cli("--root", str(root), "up", name, "--emulate", timeout=300)
        finally:
            force_remove(f"composegen-{name}")
    assert res.returncode == 3, res.stderr
    lines = res.stderr.splitlines()
    pulled = [line for line in lines if "could not be pulled" in line]
    assert len(pulled) == 1 and pulled[0].startswith(
        f"preflight FAIL prometheus: monitoring.image: image {image}"
    )
    held_port = [
        line for line in lines if f"prometheus port 127.0.0.1:{port} is already in use" in line
    ]
    assert len(held_port) == 1 and "monitoring.port" in held_port[0], res.stderr
    assert lines[-1].startswith("composegen: preflight failed: prometheus, port"), lines[-1]
    assert "Traceback" not in res.stderr and project_leftovers(f"composegen-{name}") == []
