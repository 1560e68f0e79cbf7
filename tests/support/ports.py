"""Free ports for tests: below the kernel's ephemeral range, so an outgoing connection's local port
can never take a port between the moment a test picks it and the moment a server binds it (the
door's Caddy restarting on a busy 127.0.0.1:PORT in CI), and one slice per xdist worker."""

from __future__ import annotations

import os
import random
import socket

LOW, HIGH = 12000, 32000  # Linux's ephemeral range starts at 32768


def _ephemeral_start() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as fh:
            return int(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _slice() -> range:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    count = max(int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1), 1)
    index = int(worker) % count if worker.isdigit() else 0
    high = min(HIGH, _ephemeral_start())
    if high - LOW < 1000 * count:  # an unusual ephemeral range: fall back to the whole band
        high = HIGH
    width = (high - LOW) // count
    return range(LOW + index * width, LOW + (index + 1) * width)


_given: set[int] = set()  # never the same port twice in one process (a project asks for four)


def free_port() -> int:
    """A port nothing on 127.0.0.1 or 0.0.0.0 holds now, from this worker's slice, not given before
    by this process."""
    ports = _slice()
    for _ in range(500):
        port = random.choice(ports)
        if port in _given:
            continue
        try:
            for host in ("127.0.0.1", "0.0.0.0"):
                with socket.socket() as sock:
                    sock.bind((host, port))
        except OSError:
            continue
        _given.add(port)
        return port
    raise RuntimeError(f"no free port in {ports.start}-{ports.stop - 1}")
