"""The one file the edge's gate runs (render joins gatekeeper.py's parts into out/edge/gatekeeper.py): it
imports only the stdlib and, run alone as the gate container runs it (`python3 -I`), it serves, and a
SIGTERM ends it with exit 0: as PID 1 of its container a signal without a handler does nothing, so
`docker stop` (every `edge down`) waited its 10 s grace."""

from __future__ import annotations

import ast
import contextlib
import hashlib
import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

from composegen.edge import render
from tests.support.ports import free_port

KEY = "cgk_artifact"


def test_the_joined_gatekeeper_imports_only_the_stdlib_and_serves(tmp_path):
    gate = tmp_path / "gatekeeper.py"
    gate.write_text(render.gatekeeper_text())
    tree = ast.parse(gate.read_text())
    modules = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    modules |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert modules and {m.split(".")[0] for m in modules} <= set(sys.stdlib_module_names), modules
    state = tmp_path / "state"
    state.mkdir()
    digest = hashlib.sha256(KEY.encode()).hexdigest()
    (state / "keys.json").write_text(json.dumps({"clients": [{"name": "a", "sha256": digest}]}))
    route = {"profile": "p", "upstream": "127.0.0.1:1", "served_name": "s"}
    (state / "routes.json").write_text(json.dumps({"retry_after": 5, "aliases": {"ds4": route}}))
    port = free_port()
    argv = [sys.executable, "-I", str(gate), "--state", str(state), "--port", str(port)]
    proc = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            assert proc.poll() is None and time.monotonic() < deadline, (
                proc.stdout and proc.stdout.read()
            )
            time.sleep(0.05)
        url = f"http://127.0.0.1:{port}/v1/models"
        with urllib.request.urlopen(
            urllib.request.Request(url, headers={"Authorization": f"Bearer {KEY}"})
        ) as r:
            assert json.loads(r.read())["data"][0]["id"] == "ds4"
        try:
            urllib.request.urlopen(url)
            raise AssertionError("no key, yet an answer")
        except urllib.error.HTTPError as refused:
            assert refused.code == 401
        proc.terminate()
        assert proc.wait(10) == 0  # its own handler: without one, -SIGTERM here and 10 s in Docker
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
