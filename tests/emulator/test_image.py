"""The emulator image on the real engine: built from build_context(), run like the real vLLM image.

Needs the base image from scripts/provision.sh (composegen/base:py3, or COMPOSEGEN_BASE_IMAGE).
Builds under a tag of its own (image_tag() plus a random suffix) and removes it and its containers after.
"""

from __future__ import annotations

import subprocess
import time
import uuid

import httpx
import pytest

from composegen.stack.emulatorimage import IMAGE_REPO, build_context, context_files, image_tag
from composegen.stack.engine import BASE_IMAGE

LABEL = f"io.composegen.test=emulator-image-{uuid.uuid4().hex[:8]}"  # per worker process


def docker(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(
            f"docker {' '.join(args)} failed ({result.returncode}): {result.stderr}"
        )
    return result


def test_context_and_tag_are_content_addressed(tmp_path):
    context = build_context(tmp_path / "ctx")
    written = sorted(str(p.relative_to(context)) for p in context.rglob("*") if p.is_file())
    assert written == [f.path for f in context_files()]
    assert {"Dockerfile", "vllm", "serve-flags.json", "composegen/emulator/runner.py"} <= set(
        written
    )
    assert "composegen/emulator/image.py" not in written
    assert (context / "vllm").stat().st_mode & 0o111
    assert image_tag().startswith(f"{IMAGE_REPO}:") and image_tag() == image_tag()
    with pytest.raises(FileExistsError):
        build_context(context)


def test_tag_follows_the_content(tmp_path, monkeypatch):
    catalog = tmp_path / "flags.json"
    catalog.write_text('{"flags": []}')
    before = image_tag()
    monkeypatch.setenv("EMU_FLAG_CATALOG", str(catalog))
    assert image_tag() != before


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    # A tag of our own: the driver and other test runs share image_tag(), so never build over or remove it.
    tag = f"{image_tag()}-test-{uuid.uuid4().hex[:8]}"
    context = build_context(tmp_path_factory.mktemp("emulator-context") / "ctx")
    docker("build", "-q", "-t", tag, "--build-arg", f"BASE={BASE_IMAGE}", str(context), timeout=600)
    yield tag
    # Only this worker's containers (LABEL is per process): another worker's module fixture runs the same tests,
    # and removing its running containers was this test's flake under 4 workers. Not `ancestor=TAG`: the tag
    # names the very image every emulated stack of the suite runs.
    for cid in docker("ps", "-aq", "--filter", f"label={LABEL}").stdout.split():
        docker("rm", "-f", cid, check=False)
    docker("rmi", tag, check=False)


@pytest.fixture
def run(image):
    started: list[str] = []

    def _run(*args: str, publish: bool = False, env: dict | None = None) -> str:
        options = ["--label", LABEL, "--name", f"cg-emu-test-{uuid.uuid4().hex[:8]}"]
        if publish:
            options += ["-p", "127.0.0.1::8000"]
        for key, value in (env or {}).items():
            options += ["-e", f"{key}={value}"]
        cid = docker("run", "-d", *options, image, *args).stdout.strip()
        started.append(cid)
        return cid

    yield _run
    for cid in started:
        docker("rm", "-f", cid, check=False)


@pytest.mark.docker
def test_image_metadata(image):
    inspected = docker(
        "image",
        "inspect",
        "-f",
        '{{json .Config.Entrypoint}} {{index .Config.Labels "io.composegen.emulator"}}',
        image,
    ).stdout.strip()
    assert inspected == '["vllm","serve"] true'


@pytest.mark.docker
def test_misspelled_flag_exits_2_in_the_container(run):
    cid = run("org/model", "--max-num-batched-tokenz", "4096")
    assert docker("wait", cid, timeout=60).stdout.strip() == "2"
    logs = docker("logs", cid)
    assert "vllm serve: error:" in logs.stderr
    assert "unrecognized arguments: --max-num-batched-tokenz 4096" in logs.stderr


@pytest.mark.docker
def test_serves_models_on_a_published_loopback_port(run):
    cid = run(
        "org/model",
        "--served-model-name",
        "demo",
        "--max-model-len",
        "8k",
        publish=True,
        env={"EMU_LOAD_SECONDS": "0.5"},
    )
    port = docker("port", cid, "8000/tcp").stdout.split()[0].rsplit(":", 1)[1]
    deadline = time.monotonic() + 60
    models = None
    while time.monotonic() < deadline:
        try:
            response = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2)
            if response.status_code == 200:
                models = response.json()
                break
        except httpx.HTTPError:
            pass
        state = docker("inspect", "-f", "{{.State.Status}}", cid).stdout.strip()
        assert state == "running", docker("logs", cid).stdout
        time.sleep(0.3)
    assert models is not None, docker("logs", cid).stdout
    assert models["data"][0]["id"] == "demo" and models["data"][0]["root"] == "org/model"
    assert models["data"][0]["max_model_len"] == 8000
    shm = docker("exec", cid, "ls", "/dev/shm").stdout.split()
    # TP 1 on one node: no message queues, one semaphore, as a real 0.26.0 server showed
    assert not any(name.startswith("psm_") for name in shm) and any(
        name.startswith("sem.loky-") for name in shm
    )
    logs = docker("logs", cid).stdout
    assert "(APIServer pid=1)" in logs and "Application startup complete." in logs
    docker("stop", "-t", "10", cid, timeout=60)  # SIGTERM to PID 1: a clean exit
    assert docker("inspect", "-f", "{{.State.ExitCode}}", cid).stdout.strip() == "0"
    assert "Application shutdown complete." in docker("logs", cid).stdout
