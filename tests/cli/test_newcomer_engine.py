"""Issue 20 on the real engine: `status` columns and exit codes, a failed image check in one clean line,
and a port conflict that names its holder (a real listening process, a real container)."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest

from tests.support.cli import run_cli
from tests.support.engine import emulated_project, force_remove, free_port

pytestmark = pytest.mark.docker


def test_status_shows_endpoint_and_model_then_exits_3_once_the_stack_is_gone(tmp_path):
    root, name, port = emulated_project(tmp_path, load=0.2)
    try:
        assert run_cli("--root", str(root), "up", name, "--emulate").returncode == 0
        res = run_cli("--root", str(root), "status", name)
        assert res.returncode == 0, res.stderr
        header, row = res.stdout.splitlines()[:2]
        assert header.split()[6:9] == ["ENDPOINT", "MODEL", "API"]
        # the row's cells under those headings
        start, end = header.index("ENDPOINT"), header.index("MAX_LEN")
        assert row[start:end].split() == [f"127.0.0.1:{port}", f"{name}-served", "ready"]
        endpoint = json.loads(run_cli("--root", str(root), "status", name, "--json").stdout)[
            "stacks"
        ][0]["endpoint"]
        assert (
            endpoint["url"] == f"http://127.0.0.1:{port}"
            and endpoint["served_name"] == f"{name}-served"
        )
        assert run_cli("--root", str(root), "down", name).returncode == 0
        gone = run_cli("--root", str(root), "status", name)
        assert gone.returncode == 3 and gone.stdout == ""
        assert (
            f"composegen: {name} is not running" in gone.stderr
            and f"composegen up {name}" in gone.stderr
        )
        as_json = run_cli("--root", str(root), "status", name, "--json")
        assert as_json.returncode == 3 and json.loads(as_json.stdout) == {
            "aliases": None,
            "project": str(root.resolve()),
            "stacks": [],
        }
    finally:
        force_remove(f"composegen-{name}")


def test_a_failed_image_check_is_one_clean_line(tmp_path):
    root, name, _ = emulated_project(tmp_path)
    path = root / "profiles" / f"{name}.yaml"
    registry = f"127.0.0.1:{free_port()}"  # nothing listens: the engine's pull is refused, locally
    text = path.read_text().replace("image: example/vllm@", f"image: {registry}/nope/vllm@")
    path.write_text(text)
    assert run_cli("--root", str(root), "render", name).returncode == 0
    # not emulated: the profile's own image is checked
    res = run_cli("--root", str(root), "up", name)
    assert res.returncode == 3, res.stderr
    said = [line for line in res.stderr.splitlines() if "could not be pulled" in line]
    assert len(said) == 1, res.stderr  # once, not again in the closing error
    assert said[0].startswith("preflight FAIL image: ") and "connection refused" in said[0]
    assert "Server Error" not in res.stderr and "http+docker" not in res.stderr
    assert res.stderr.splitlines()[-1].startswith("composegen: preflight failed: image")


def test_a_failed_pull_explanation_is_cut_at_a_word():
    import docker.errors

    from composegen.stack import compose

    long = "registry says: " + " ".join(f"word{i}" for i in range(100))
    text = compose.one_line(
        docker.errors.APIError("500 Server Error for http+docker://x", explanation=long)
    )
    assert text.startswith("registry says: word0") and text.endswith(" …") and len(text) <= 302
    assert text.removesuffix(" …").split()[-1] in long.split()  # a whole word, never cut mid-word


def test_a_port_held_by_a_process_names_its_pid_and_the_field(tmp_path):
    root, name, port = emulated_project(tmp_path)
    listener = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import socket,time; s=socket.socket(); s.bind(('127.0.0.1',{port})); s.listen(); "
            "print('up', flush=True); time.sleep(120)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert listener.stdout is not None and listener.stdout.readline() == "up\n"
        res = run_cli("--root", str(root), "up", name, "--emulate")
        assert res.returncode == 3, res.stderr
        (line,) = [x for x in res.stderr.splitlines() if x.startswith("preflight FAIL port:")]
        assert (
            f"127.0.0.1:{port} is already in use" in line
            and f"held by pid {listener.pid} (python" in line
        )
        assert "`service.port.host` in the profile sets another port" in line
    finally:
        listener.kill()
        listener.wait()
        force_remove(f"composegen-{name}")


def test_a_port_published_by_a_container_names_the_container(tmp_path):
    root, name, port = emulated_project(tmp_path)
    holder = f"h9-port-{uuid.uuid4().hex[:8]}"
    run = [
        "docker",
        "run",
        "-d",
        "--rm",
        "--name",
        holder,
        "-p",
        f"127.0.0.1:{port}:9",
        "composegen/base:py3",
    ]
    started = subprocess.run([*run, "sleep", "120"], capture_output=True, text=True)
    assert started.returncode == 0, started.stderr
    try:
        res = run_cli("--root", str(root), "up", name, "--emulate")
        assert res.returncode == 3, res.stderr
        (line,) = [x for x in res.stderr.splitlines() if x.startswith("preflight FAIL port:")]
        assert f"container {holder} publishes it" in line and "`service.port.host`" in line
    finally:
        subprocess.run(["docker", "rm", "-f", holder], capture_output=True)
        force_remove(f"composegen-{name}")
