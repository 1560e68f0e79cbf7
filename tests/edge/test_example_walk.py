"""examples/team-edge/README.md run as written (issue 51 #2), emulated, line by line on a copy of the example:
render, the edge, a stack, a key, the curl through the edge's TLS, qualify, promote, rollback, edge status,
the standby pair, then the README's own clean-up. The copy is a second copy on this engine as its README
says (issue 51 #3): one file, composegen.yaml, scopes every compose project, container name and door port
(the curl's port is the one the test moves in the README's text). It pins the edge image to this machine's
tag, as the refusal's hint tells a user to (tests/edge/test_example.py)."""

from __future__ import annotations

import json
import os
import random
import re
import shlex
import socket
import subprocess
import uuid
from pathlib import Path

import pytest

from composegen.edge import image
from tests.edge.test_example import _copy_pinned
from tests.support.cli import run_cli
from tests.support.edge import EdgeProject
from tests.support.engine import force_remove
from tests.support.ports import _ephemeral_start

pytestmark = pytest.mark.docker
README = Path(__file__).resolve().parents[2] / "examples/team-edge/README.md"
PROFILES = ("8192-131k", "4096-131k", "sb-8192", "sb-4096")
PORTS = (39443, 39490, 39070, 39071, 39072, 39073)  # the edge's listen and metrics, the stacks'


def _free(port: int) -> bool:
    try:
        for host in ("127.0.0.1", "0.0.0.0"):
            with socket.socket() as sock:
                sock.bind((host, port))
    except OSError:
        return False
    return True


def _ephemeral_range() -> tuple[int, int]:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as fh:
            low, high = map(int, fh.read().split()[:2])
            return low, high
    except (OSError, ValueError):
        return _ephemeral_start(), 60999


def port_offset() -> int:
    """A scope.port_offset that moves each of the example's ports onto a free one outside the
    kernel's ephemeral range (tests/support/ports.py: no outgoing connection takes it meanwhile),
    below it or above it, and keeps r33's 8000 (rendered, never started) at 1024 or above."""
    low, high = _ephemeral_range()
    below = range(1024 - 8000, low - max(PORTS))  # empty when the range starts at 32514 or lower
    offsets = [*below, *range(high + 1 - min(PORTS), 65536 - max(PORTS))]
    if not offsets:
        pytest.fail(f"no scope.port_offset keeps {PORTS} and 8000 outside ephemeral {low}-{high}")
    for _ in range(50):
        offset = random.choice(offsets)
        if all(_free(p + offset) for p in PORTS):
            return offset
    raise RuntimeError("no offset frees all six ports")


def walk(text: str) -> tuple[list[str], list[str]]:
    """The README's shell lines (continuations joined, comments dropped, the `cd` into the example
    left to the test), and the clean-up its last paragraph names."""
    lines = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.split(r"\s{2,}# ", line)[0].strip()
            lines += [line] if line and not line.startswith("cd ") else []
    done = text[text.index("When done:") :]
    return lines, re.findall(r"`(composegen [^`]+)`", done)


def run(line: str, root: Path, env: dict[str, str]) -> str:
    """One README line in ROOT, its stdout: its composegen commands (`a && b`, `a > file`) through the
    console script's own entry in this process (tests/support/cli.py: ~0.1 s a call, not 2-4 s at this
    machine's load), anything else (the curl) in bash."""
    if not line.startswith("composegen "):
        proc = subprocess.run(["bash", "-c", line], cwd=root, env=env, capture_output=True,
                              text=True, timeout=120)  # fmt: skip
        assert proc.returncode == 0, f"{line}: {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        return proc.stdout
    out = ""
    for part in line.split(" && "):
        command, _, target = part.partition(" > ")
        res = run_cli(*shlex.split(command)[1:], cwd=root, timeout=600)
        assert res.returncode == 0, f"{part}: {res.returncode}\n{res.stdout}\n{res.stderr}"
        if target:
            (root / target.strip()).write_text(res.stdout)
        out += res.stdout
    return out


def door(edge: EdgeProject, key: str) -> None:
    """The edge as the example pinned it (the image built from this machine's caddy when missing):
    its own CA, the keys, the allowlist."""
    built = ["docker", "image", "inspect", "--format", "{{.Id}}", image.local_tag()]
    assert subprocess.run(built, capture_output=True, text=True).stdout.startswith("sha256:")
    models = json.loads(edge.request("GET", "/v1/models", key)[2])["data"]
    assert [m["id"] for m in models] == ["ds4-flash"]
    assert edge.request("GET", "/v1/models")[0] == 401
    assert edge.request("POST", "/invocations", key)[0] == 404


def test_the_example_readme_runs_as_written(tmp_path):
    if not image.CADDY.is_file():
        pytest.fail("no caddy: run `bash scripts/provision.sh` (provision.d/70-caddy.sh)")
    tag, offset = f"w{uuid.uuid4().hex[:5]}", port_offset()
    root = _copy_pinned(tmp_path, image.local_tag(), "edge")  # the edge keeps its name
    (root / "composegen.yaml").write_text(f"scope: {{name: {tag}, port_offset: {offset}}}\n")
    lines, cleanup = walk(README.read_text().replace("39443", str(39443 + offset)))
    assert len(lines) >= 16 and len(cleanup) == 3, (lines, cleanup)
    env = {**os.environ}
    edge = EdgeProject(root, "edge", *PROFILES[:2], 39443 + offset, 39490 + offset, {}, tag)
    said: dict[str, str] = {}
    try:
        for line in [*lines, *cleanup]:
            said[line] = run(line, root, env)
            if " keys add alice" in line:
                env["KEY"] = said[line].strip()
                door(edge, env["KEY"])
        curl = next(line for line in lines if line.startswith("curl "))
        # through the edge's TLS, answered by the stack the alias points at
        assert json.loads(said[curl])["model"] == "deepseek-v4-flash-r33-b4096-131k", said[curl]
        status = next(line for line in lines if line.endswith("edge status"))
        assert "4096-131k" in said[status] and "alice" in said[status], said[status]
        ps = subprocess.run(["docker", "ps", "-aq", "--filter", f"name={tag}"],
                            capture_output=True, text=True)  # fmt: skip
        assert ps.stdout.strip() == "", "the README's clean-up left containers"
    finally:
        for name in PROFILES[2:]:  # edge.cleanup: the A/B pair
            force_remove(f"{tag}-{name}")
        edge.cleanup()
