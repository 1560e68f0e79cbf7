"""examples/team-edge/README.md run as written (issue 51 #2), emulated, line by line on a copy of the example:
render, the edge, a stack, a key, the curl through the edge's TLS, qualify, promote, rollback, edge status,
the standby pair, then the README's own clean-up. The example's names are one per Docker engine (its
README says so), so this test (not a user) renames what would collide with another checkout on a shared
engine: the edge, its ports, the profiles (their compose projects) and their container names; and it pins
the edge image to this machine's tag, as the refusal's hint tells a user to (tests/edge/test_example.py)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import uuid
from pathlib import Path

import pytest

from composegen.edge import image
from tests.edge.test_example import _copy_pinned
from tests.support.cli import run_cli
from tests.support.edge import EdgeProject
from tests.support.engine import force_remove, free_port

pytestmark = pytest.mark.docker
README = Path(__file__).resolve().parents[2] / "examples/team-edge/README.md"
PROFILES = ("8192-131k", "4096-131k", "sb-8192", "sb-4096")


def renamed(text: str, tag: str, ports: dict[str, int]) -> str:
    """TEXT with the example's engine-wide names made this test's own."""
    text = re.sub(r"(?<![\w-])(" + "|".join(PROFILES) + r")(?![\w-])", rf"{tag}-\1", text)
    text = text.replace("container_name: ds4-flash", f"container_name: {tag}-ds4-flash")
    text = text.replace("name: edge\n", f"name: edge-{tag}\n")
    for old, new in ports.items():
        text = re.sub(rf"(?<=[ :]){old}\b", str(new), text)
    return text


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
    tag = f"w{uuid.uuid4().hex[:5]}"
    ports = {p: free_port() for p in ("39443", "39490", "39070", "39071", "39072", "39073")}
    root = _copy_pinned(tmp_path, image.local_tag(), "edge")
    for path in [root / "edge.yaml", *(root / "profiles").glob("*.yaml")]:
        target = path.with_name(renamed(path.name, tag, {}))
        text = renamed(path.read_text(), tag, ports)
        path.unlink()
        target.write_text(text)
    lines, cleanup = walk(renamed(README.read_text(), tag, ports))
    assert len(lines) >= 16 and len(cleanup) == 3, (lines, cleanup)
    env = {**os.environ}
    pair = (f"{tag}-8192-131k", f"{tag}-4096-131k")
    edge = EdgeProject(root, f"edge-{tag}", *pair, ports["39443"], ports["39490"], {})
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
        assert f"{tag}-4096-131k" in said[status] and "alice" in said[status], said[status]
        ps = subprocess.run(["docker", "ps", "-aq", "--filter", f"name={tag}"],
                            capture_output=True, text=True)  # fmt: skip
        assert ps.stdout.strip() == "", "the README's clean-up left containers"
    finally:
        for name in PROFILES[2:]:  # edge.cleanup: the A/B pair
            force_remove(f"composegen-{tag}-{name}")
        edge.cleanup()
