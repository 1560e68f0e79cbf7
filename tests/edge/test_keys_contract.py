"""The keys contract: what `composegen edge keys …` writes is what the shipped gate checks. The key is
made by the real CLI (in this process) in a copy of examples/team-edge; the check is the example's
committed out/edge/gatekeeper.py (the one file the gate container runs), loaded from disk and served
here on the state directory its compose file mounts. No container."""

from __future__ import annotations

import importlib.util
import shutil
import urllib.error
import urllib.request
from pathlib import Path

import yaml

from composegen.edge.keys import KEY_PREFIX
from tests.support.cli import run_inproc
from tests.support.stub_server import running

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "team-edge"


def _shipped_gate():
    spec = importlib.util.spec_from_file_location(
        "shipped_gatekeeper", EXAMPLE / "out/edge/gatekeeper.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _state_dir(root: Path) -> Path:
    """The host directory the gate's compose service mounts at /state (it reads /state/keys.json)."""
    compose = yaml.safe_load((root / "out/edge/compose.yaml").read_text())
    (mount,) = [v for v in compose["services"]["gate"]["volumes"] if v.split(":")[1] == "/state"]
    return (root / "out/edge" / mount.split(":")[0]).resolve()


def _status(port: int, key: str) -> int:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/models", headers={"Authorization": f"Bearer {key}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status
    except urllib.error.HTTPError as refused:
        return refused.code


def _key(*args: str, root: Path) -> str:
    res = run_inproc("--root", str(root), "edge", "keys", *args)
    assert res.returncode == 0, res.stderr
    # the line the CLI printed (the gate, serving in a thread of this process, logs to stdout too)
    (key,) = [line for line in res.stdout.split() if line.startswith(KEY_PREFIX)]
    return key


def test_a_key_edge_keys_add_makes_is_the_one_the_shipped_gate_lets_in(tmp_path):
    root = tmp_path / "team-edge"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".composegen"))
    alice = _key("add", "alice", root=root)
    bob = _key("add", "bob", root=root)
    state = _state_dir(root)
    assert (state / "keys.json").is_file()
    gate = _shipped_gate().serve(str(state), "127.0.0.1", 0)
    with running(gate):
        port = gate.server_port
        assert _status(port, alice) == 200 and _status(port, bob) == 200
        assert _status(port, alice[:-1] + ("x" if alice[-1] != "x" else "y")) == 401  # a wrong key
        assert _status(port, "") == 401
        rotated = _key("rotate", "alice", root=root)
        assert (_status(port, alice), _status(port, rotated)) == (401, 200)
        assert run_inproc("--root", str(root), "edge", "keys", "revoke", "bob").returncode == 0
        assert (_status(port, bob), _status(port, rotated)) == (401, 200)
