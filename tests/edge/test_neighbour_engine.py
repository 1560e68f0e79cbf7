"""A neighbour on the same link, routing the Docker subnets through this host, reaches the edge's TLS
listener and nothing else (issue 38): not the metrics listener, not the operator doors, not the gate, not
the stacks. The neighbour is a network namespace on a veth pair with a route to every subnet of the edge's
containers; the host's FORWARD policy is what Docker left it (DROP). Before the door, the loopback
listeners were published ports, and Docker accepts forwarded packets to a published port's container."""

from __future__ import annotations

import contextlib
import json
import os
import random
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest

from tests.support.edge import EdgeProject, edge_project, serving

pytestmark = pytest.mark.docker

PROBE = """
import json, socket, sys
found = {}
for host, port in json.loads(sys.argv[1]):
    s = socket.socket(); s.settimeout(1.5)
    try:
        s.connect((host, port)); found[f"{host}:{port}"] = "open"
    except ConnectionRefusedError:
        found[f"{host}:{port}"] = "refused"
    except OSError as exc:
        found[f"{host}:{port}"] = type(exc).__name__
    finally:
        s.close()
print(json.dumps(found))
"""


def _ip(*argv: str) -> None:
    proc = subprocess.run(["ip", *argv], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, f"ip {' '.join(argv)}: {proc.stderr}"


def _local_engine() -> bool:
    host = os.environ.get("DOCKER_HOST", "")
    return (not host or host.startswith("unix://")) and not os.environ.get("DOCKER_CONTEXT")


@contextlib.contextmanager
def neighbour(subnets: list[str]) -> Iterator[tuple[str, str]]:
    """(namespace, this host's address as the neighbour sees it)."""
    tag = uuid.uuid4().hex[:6]
    ns, here, there = f"cgn{tag}", f"cgh{tag}", f"cgp{tag}"
    block = random.randrange(0, 16000) * 4
    host_ip = f"10.{250 + block // 65536}.{block // 256 % 256}.{block % 256 + 1}"
    peer_ip = host_ip.rsplit(".", 1)[0] + f".{block % 256 + 2}"
    _ip("netns", "add", ns)
    try:
        _ip("link", "add", here, "type", "veth", "peer", "name", there)
        _ip("link", "set", there, "netns", ns)
        _ip("addr", "add", f"{host_ip}/30", "dev", here)
        _ip("link", "set", here, "up")
        _ip("-n", ns, "addr", "add", f"{peer_ip}/30", "dev", there)
        _ip("-n", ns, "link", "set", there, "up")
        _ip("-n", ns, "link", "set", "lo", "up")
        for subnet in subnets:
            _ip("-n", ns, "route", "add", subnet, "via", host_ip)
        yield ns, host_ip
    finally:
        subprocess.run(["ip", "link", "del", here], capture_output=True, timeout=30)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)


def _inspect(name: str) -> dict:
    proc = subprocess.run(["docker", "inspect", name], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)[0]


def _addresses(container: str) -> list[str]:
    networks = _inspect(container)["NetworkSettings"]["Networks"]
    return [n["IPAddress"] for n in networks.values() if n.get("IPAddress")]


def _subnets(container: str) -> list[str]:
    found = []
    for name in _inspect(container)["NetworkSettings"]["Networks"]:
        net = json.loads(
            subprocess.run(
                ["docker", "network", "inspect", name], capture_output=True, text=True
            ).stdout
        )
        found += [c["Subnet"] for c in net[0]["IPAM"]["Config"] if ":" not in c["Subnet"]]
    return found


@pytest.fixture(scope="module")
def edge(tmp_path_factory, edge_img) -> Iterator[EdgeProject]:
    with serving(edge_project(tmp_path_factory.mktemp("neighbour"), edge_img)) as project:
        yield project


def test_a_routed_neighbour_reaches_only_the_tls_listener(edge):
    if not _local_engine():
        pytest.skip("the engine is not on this machine: its Docker subnets are not routed here")
    proxy, gate, stack = (
        f"composegen-{edge.name}-proxy-1",
        f"composegen-{edge.name}-gate-1",
        f"composegen-{edge.old}-vllm-1",
    )
    loopback_ports = [edge.metrics_port, *edge.ports.values()]
    targets = [
        (ip, port) for ip in _addresses(proxy) for port in [8443, 9090, 2019, 8080, *loopback_ports]
    ]
    targets += [(ip, 8080) for ip in _addresses(gate)] + [(ip, 8000) for ip in _addresses(stack)]
    subnets = sorted({s for c in (proxy, gate, stack) for s in _subnets(c)})
    with neighbour(subnets) as (ns, host_ip):
        targets += [(host_ip, port) for port in [edge.port, *loopback_ports]]
        proc = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-I", "-c", PROBE, json.dumps(targets)],
                              capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)
    opened = sorted(where for where, result in found.items() if result == "open")
    assert opened and all(
        where.endswith(":8443") and where.split(":")[0] in _addresses(proxy) for where in opened
    ), found
    # on this host, the loopback listeners still answer (through the door), and the door keeps dev routes in
    port = edge.ports[edge.old]  # only the old stack is up: the new one's door answers 502
    res = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", f"http://127.0.0.1:{port}/health"],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert res.stdout == "200", res
    for route in (
        "/sleep",
        "/wake_up",
        "/collective_rpc",
        "/Sleep",
        "/sl%65ep",
        "/reset_prefix_cache/",
    ):
        res = subprocess.run(["curl", "-s", "-X", "POST", f"http://127.0.0.1:{port}{route}"],
                             capture_output=True, text=True, timeout=60)  # fmt: skip
        assert json.loads(res.stdout)["error"]["code"] == 404, (route, res.stdout)
