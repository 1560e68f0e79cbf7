"""port_holder finds the real process listening on a port (IPv4 and IPv6), and nothing for a free port."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from composegen.stack.portowner import describe, port_holder

LISTENER = """
import socket, sys
s = socket.socket(socket.AF_INET6 if sys.argv[1] == "6" else socket.AF_INET)
s.bind(("::1" if sys.argv[1] == "6" else "127.0.0.1", 0))
s.listen()
print(s.getsockname()[1], flush=True)
sys.stdin.read()
"""


@pytest.mark.parametrize("family", ["4", "6"])
def test_names_the_listening_process(family):
    proc = subprocess.Popen([sys.executable, "-c", LISTENER, family], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)  # fmt: skip
    try:
        port = int(proc.stdout.readline())
        holder = port_holder(port)
        assert holder is not None and holder.pid == proc.pid
        assert f"pid {proc.pid}" in describe(port, holder) and "python" in describe(port, holder)
    finally:
        proc.stdin.close()
        proc.wait(10)


def test_a_free_port_has_no_holder():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))  # bound but not listening: nobody holds it for connections
        assert port_holder(s.getsockname()[1]) is None
