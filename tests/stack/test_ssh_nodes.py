"""ssh:// nodes against a real sshd in front of the second engine: the ssh config alias (non-default
Port) holds, one connection per node for a whole command, a frozen engine fails within the deadline and
names the node, and ssh's own reason (host key, key refused, port refused) reaches the message."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.stack.test_multinode_engine import two_node  # noqa: F401  (fixture)
from tests.support.helpers import run_cli
from tests.support.second_engine import leftovers, second_engine  # noqa: F401  (session fixture)
from tests.support.sshd import ssh_node  # noqa: F401  (session fixture)

pytestmark = pytest.mark.docker

# One process = one composegen command: several engine calls, then exit (tunnels closed at exit).
COMMAND = """
import json, sys
from composegen.errors import EngineError
from composegen.stack import engine
target = engine.Target(host=sys.argv[1])
try:
    info = engine.engine_info(target)
    for _ in range(int(sys.argv[2])):
        engine.engine_info(target)
    print(json.dumps({"ok": True, "id": info["ID"], "name": info["Name"]}))
except EngineError as exc:
    print(json.dumps({"ok": False, "message": exc.message, "hint": exc.hint}))
"""


def run_command(node, config, calls: int = 0, timeout: float = 60, **env: str) -> dict:
    res = subprocess.run(
        [sys.executable, "-c", COMMAND, node.url, str(calls)],
        env={**os.environ, "COMPOSEGEN_SSH_CONFIG": str(config), **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    return json.loads(res.stdout)


def ssh_children_left(node) -> list[str]:
    """composegen's ssh processes for NODE's config: other xdist workers run their own sshd and tunnels
    at the same time, under another fixture directory."""
    res = subprocess.run(["pgrep", "-a", "-f", "composegen-ssh-"], capture_output=True, text=True)
    return [
        line for line in res.stdout.splitlines() if "pgrep" not in line and str(node.dir) in line
    ]


def test_an_alias_with_a_non_default_port_reaches_the_nodes_engine(ssh_node, second_engine):  # noqa: F811
    expected = second_engine.docker("info", "--format", "{{.ID}}").stdout.strip()
    seen = run_command(ssh_node, ssh_node.config)
    assert seen["ok"], seen
    # the engine DOCKER_HOST in ~/.ssh/environment names, not the local one
    assert seen["id"] == expected
    assert ssh_node.port != 22


def test_a_command_uses_a_bounded_number_of_connections_and_leaves_no_ssh_behind(ssh_node):  # noqa: F811
    before = ssh_node.accepted()
    assert run_command(ssh_node, ssh_node.config, calls=40)["ok"]
    time.sleep(0.2)  # sshd logs the acceptance asynchronously
    # Two per node and command, whatever the number of API calls: the DOCKER_HOST probe and the tunnel.
    assert ssh_node.accepted() - before == 2
    assert ssh_children_left(ssh_node) == []


def test_a_frozen_engine_fails_within_the_deadline_and_names_the_node(ssh_node, second_engine):  # noqa: F811
    pid = int((second_engine.root / "docker.pid").read_text())
    os.kill(pid, signal.SIGSTOP)
    try:
        seen = run_command(ssh_node, ssh_node.config, timeout=40, COMPOSEGEN_ENGINE_TIMEOUT="3")
    finally:
        os.kill(pid, signal.SIGCONT)
    assert not seen["ok"]
    assert ssh_node.url in seen["message"]


@pytest.mark.parametrize(
    "settings, ssh_says, hint_word",
    [
        (
            {"UserKnownHostsFile": "{dir}/other_known_hosts"},
            "Host key verification failed",
            "host key",
        ),
        ({"IdentityFile": "{dir}/id_stranger"}, "Permission denied", "authorized_keys"),
        ({"Port": "{closed}"}, "Connection refused", "Port"),
    ],
    ids=["unknown-host-key", "rejected-key", "refused-port"],
)
def test_ssh_failures_say_what_ssh_said_with_a_hint(ssh_node, settings, ssh_says, hint_word):  # noqa: F811
    other = ssh_node.dir / "other_host_key.pub"
    (ssh_node.dir / "other_known_hosts").write_text(
        f"[127.0.0.1]:{ssh_node.port} {other.read_text()}"
    )
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]  # bound, never listening: connections are refused
        values = {k: v.format(dir=ssh_node.dir, closed=closed) for k, v in settings.items()}
        seen = run_command(ssh_node, ssh_node.write_config(**values), timeout=40)
    assert not seen["ok"]
    assert ssh_says in seen["message"] and ssh_node.url in seen["message"]
    assert hint_word in seen["hint"]


def test_up_status_logs_shm_down_through_an_ssh_alias(two_node, ssh_node, second_engine):  # noqa: F811
    root, name = two_node(worker_host=ssh_node.url)
    env = {"COMPOSEGEN_SSH_CONFIG": str(ssh_node.config)}
    before = ssh_node.accepted()
    res = run_cli("--root", str(root), "up", name, "--emulate", "--json", env=env, timeout=600)
    assert res.returncode == 0, res.stderr
    up = json.loads(res.stdout)
    assert up["nodes"][1]["engine"] == ssh_node.url and up["startup"]["ready"] is True
    time.sleep(0.2)  # sshd logs acceptances asynchronously
    assert ssh_node.accepted() - before == 2  # one question and one tunnel for the whole `up`

    status = json.loads(run_cli("--root", str(root), "status", name, "--json", env=env).stdout)[
        "stacks"
    ][0]
    assert [(n["name"], n["reachable"]) for n in status["nodes"]] == [("n0", True), ("n1", True)]
    worker = f"composegen-{name}-n1-vllm-1"
    assert ("n1", worker, "running") in [
        (c["node"], c["name"], c["state"]) for c in status["containers"]
    ]
    logs = run_cli("--root", str(root), "logs", name, "--node", "n1", env=env)
    assert logs.returncode == 0 and "Joined the master" in logs.stdout
    shm = run_cli("--root", str(root), "shm", "--profile", name, "--json", env=env)
    assert shm.returncode == 0, shm.stderr
    res = run_cli("--root", str(root), "down", name, "--json", env=env)
    assert res.returncode == 0, res.stderr
    assert worker in json.loads(res.stdout)["removed"]
    assert leftovers(f"composegen-{name}-n1", second_engine.url) == []
    # After an emulated down the node still answers: its probe uses an image that engine holds.
    after = run_cli("--root", str(root), "shm", "--profile", name, env=env)
    assert after.returncode == 0 and "unreachable" not in after.stdout + after.stderr, (
        after.stdout + after.stderr
    )
    assert ssh_children_left(ssh_node) == []
