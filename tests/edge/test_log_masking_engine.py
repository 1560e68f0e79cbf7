"""`composegen logs` on a real container whose output is the recorded vLLM 0.26.0 log (which prints its
--api-key in clear): what composegen shows is masked, whole or followed."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest

from composegen.stack.engine import BASE_IMAGE
from tests.support.engine import _SINGLE_REST, tiny_profile
from tests.support.helpers import make_project, run_cli

pytestmark = pytest.mark.docker
LOG = (
    Path(__file__).resolve().parents[1]
    / "data"
    / "real-0.26.0-h200-apikey-routes"
    / "serve-apikey-two-names-eager.log"
)


def test_logs_of_a_server_that_printed_its_key_are_masked(tmp_path):
    name = f"m{uuid.uuid4().hex[:8]}"
    text = tiny_profile(
        f"{name}-served", "{host: 39621}", rest=_SINGLE_REST.format(load=1, extra_env="")
    )
    root = make_project(tmp_path, {name: text})
    container = f"composegen-{name}-vllm-1"
    labels = [f"com.docker.compose.project=composegen-{name}", "com.docker.compose.service=vllm",
              f"io.composegen.profile={name}"]  # fmt: skip
    argv = ["docker", "run", "--name", container, *[a for label in labels for a in ("--label", label)],
            "-v", f"{LOG}:/vllm.log:ro", BASE_IMAGE, "python3", "-c",
            "import sys; sys.stdout.write(open('/vllm.log').read())"]  # fmt: skip
    try:
        subprocess.run(argv, check=True, capture_output=True, timeout=120)
        whole = run_cli("--root", str(root), "logs", name)
        followed = run_cli("--root", str(root), "logs", name, "-f", timeout=60)
        for res in (whole, followed):
            assert res.returncode == 0, res.stderr
            assert "sk-test" not in res.stdout + res.stderr
            assert "'api_key': '***'" in res.stdout
            assert "Route: /invocations, Methods: POST" in res.stdout  # everything else is there
        assert len(whole.stdout.splitlines()) == len(LOG.read_text().splitlines())
    finally:
        subprocess.run(["docker", "rm", "-f", container], capture_output=True, timeout=60)
