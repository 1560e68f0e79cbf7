"""composegen as an installed tool: the wheel (built once per session) installed with `uv tool install` into
a fresh tool venv outside the checkout, run in an empty directory: init, validate --strict, render, doctor,
and an emulated up/down on the real engine — on the main engine (it has the base image) and on a bare
second engine that gets only what `composegen provision` makes."""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import tarfile
import urllib.request
import uuid
import zipfile
from pathlib import Path

import pytest

from tests.support.engine import free_port
from tests.support.helpers import REPO
from tests.support.registry import require_registry
from tests.support.second_engine import force_remove, leftovers

BASE_TAG = "composegen/base:py3"


def test_the_wheel_carries_what_the_commands_read(dists):
    names = set(zipfile.ZipFile(dists.wheel).namelist())
    for needed in (
        "composegen/templates/compose.yaml.j2",
        "composegen/templates/prometheus.yml.j2",
        "composegen/emulator/Dockerfile",
        "composegen/emulator/vllm",
        "composegen/emulator/server.py",
        "composegen/vllm/data/vllm-0.33.0-serve-flags.json",
        "composegen/cli/data/starter-profile.yaml",
        "composegen/provision/steps.py",
        # `composegen docs TOPIC`: every page the help points at
        *(f"composegen/docs/{page.name}" for page in (REPO / "docs").glob("*.md")),
    ):
        assert needed in names, needed
    assert not any(n.startswith(("tests/", "docs/", "profiles/", "scripts/")) for n in names)


def test_the_sdist_holds_tests_docs_and_profiles(dists):
    with tarfile.open(dists.sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    for needed in (
        "pyproject.toml",
        "README.md",
        "docs/install.md",
        "profiles/4096-131k.yaml",
        "out/4096-131k/compose.yaml",
        "tests/provision/test_installed_tool.py",
        "tests/support/second_engine.py",
        "templates/compose.yaml.j2",
        "scripts/provision.sh",
        "composegen/emulator/Dockerfile",
    ):
        assert needed in names, needed
    assert any(n.startswith("tests/data/") for n in names)
    assert not any(n.startswith((".venv/", ".git/", "runs/")) or "__pycache__" in n for n in names)


def _pinned_starter(project: Path, name: str, port: int) -> None:
    """`composegen init`'s starter as a user pins it: image digest and model revision; a free port."""
    path = project / "profiles" / f"{name}.yaml"
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"(?m)^image: .*$", f"image: vllm/vllm-openai@sha256:{'a' * 64}", text)
    text = re.sub(r"(?m)^image_unpinned_reason: .*\n", "", text)
    text = re.sub(r'revision: "0{40}"', f'revision: "{"b" * 40}"', text)
    text = text.replace("host: 8000", f"host: {port}").replace(
        "container_name: qwen3-small", f"container_name: {name}"
    )
    path.write_text(text, encoding="utf-8")


def _ok(res: subprocess.CompletedProcess, what: str) -> str:
    assert res.returncode == 0, (
        f"{what}: exit {res.returncode}\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    )
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr, res.stderr
    return res.stdout


def _up_and_down(tool, project: Path, name: str, host: str | None, **env: str) -> None:
    engine = {"DOCKER_HOST": host} if host else {}
    try:
        up = _ok(
            tool.run("up", name, "--emulate", cwd=project, timeout=600, **engine, **env),
            "up --emulate",
        )
        assert f"{name} is ready at http://127.0.0.1:" in up and "EMULATED" in up, up
        _ok(tool.run("down", name, cwd=project, timeout=300, **engine, **env), "down")
        assert leftovers(f"composegen-{name}", host) == []
    finally:
        force_remove(f"composegen-{name}", host)


@pytest.mark.docker
def test_installed_tool_on_an_engine_that_has_the_base_image(installed_tool, tmp_path):
    tool = installed_tool
    where = _ok(subprocess.run([str(tool.python), "-c", "import composegen; print(composegen.__file__)"],
                               capture_output=True, text=True, cwd=tmp_path), "import")  # fmt: skip
    # the tool venv's copy, not the checkout
    assert where.startswith(str(tool.python.parent.parent)), where
    assert re.fullmatch(
        r"composegen \S+ \(vLLM flag catalog 0\.33\.0\)\n",
        _ok(tool.run("--version", cwd=tmp_path), ""),
    )

    name = f"starter-{uuid.uuid4().hex[:8]}"  # unique on the shared engine
    # the pages the help points at, from the wheel (no checkout here)
    assert _ok(tool.run("docs", "install", cwd=tmp_path), "docs") == (
        REPO / "docs/install.md"
    ).read_text(encoding="utf-8")
    _ok(tool.run("init", "--name", name, cwd=tmp_path), "init")
    _pinned_starter(tmp_path, name, free_port())
    assert "ok" in _ok(tool.run("validate", "--strict", name, cwd=tmp_path), "validate --strict")
    _ok(tool.run("render", name, cwd=tmp_path), "render")
    compose = tmp_path / "out" / name / "compose.yaml"
    checked = subprocess.run(
        ["docker", "compose", "-f", str(compose), "config", "-q"], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stderr

    doctor = _ok(tool.run("doctor", cwd=tmp_path), "doctor")
    assert re.search(r"(?m)^ok +base-image +composegen/base:py3: ", doctor), doctor
    report = json.loads(_ok(tool.run("doctor", "--json", cwd=tmp_path), "doctor --json"))
    assert report["ok"] and {c["name"] for c in report["checks"]} == {
        "engine",
        "compose",
        "base-image",
        "python",
    }
    _up_and_down(tool, tmp_path, name, None)


def _pushed_base() -> str:
    """The main engine's base image in the local registry, as `REPO:TAG@sha256:…`: the pinned public base
    that provision pulls by digest (no registry outside this machine answers here)."""
    repo = f"{require_registry()}/composegen-test-{uuid.uuid4().hex[:10]}/python"
    ref = f"{repo}:3.12-slim"
    for argv in (["docker", "tag", BASE_TAG, ref], ["docker", "push", ref]):
        res = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stderr
    digests = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{json .RepoDigests}}", ref],
        capture_output=True,
        text=True,
    )
    # the tag only; the base stays
    subprocess.run(["docker", "rmi", ref], capture_output=True, timeout=60)
    (digest,) = [d.split("@", 1)[1] for d in json.loads(digests.stdout) if d.startswith(repo + "@")]
    return f"{ref}@{digest}"


def _delete_from_registry(ref: str) -> None:
    name, digest = ref.split("@")
    addr, path = name.split("/", 1)
    request = urllib.request.Request(
        f"http://{addr}/v2/{path.rsplit(':', 1)[0]}/manifests/{digest}", method="DELETE"
    )
    with contextlib.suppress(OSError):  # already gone
        urllib.request.urlopen(request, timeout=10).close()


@pytest.mark.docker
def test_installed_tool_on_an_engine_with_only_what_provision_makes(
    installed_tool, bare_second_engine, tmp_path
):
    tool, host = installed_tool, bare_second_engine.url
    assert bare_second_engine.docker("images", "-q").stdout.strip() == ""
    _ok(tool.run("init", cwd=tmp_path), "init")  # the README's quick start: profiles/starter.yaml
    # rendered: `up starter` needs nothing more
    assert (tmp_path / "out" / "starter" / "compose.yaml").is_file()
    # a free host port: 8000 may be taken on a shared machine
    _pinned_starter(tmp_path, "starter", free_port())
    _ok(tool.run("render", "starter", cwd=tmp_path), "render")

    doctor = tool.run("doctor", cwd=tmp_path, DOCKER_HOST=host)
    assert doctor.returncode == 3, doctor.stdout + doctor.stderr
    assert (
        f"at DOCKER_HOST={host}" in doctor.stdout
        and "FAIL  base-image  composegen/base:py3 is missing" in doctor.stdout
    )
    assert (
        "fix: composegen provision" in doctor.stdout
        and "hint: `composegen provision`" in doctor.stderr
    )
    refused = tool.run("up", "starter", "--emulate", cwd=tmp_path, DOCKER_HOST=host)
    assert refused.returncode == 3 and "composegen provision" in refused.stderr, refused.stderr
    assert "scripts/" not in refused.stderr + doctor.stdout + doctor.stderr

    source = _pushed_base()
    try:
        asked = tool.run("provision", cwd=tmp_path, DOCKER_HOST=host, COMPOSEGEN_PUBLIC_BASE=source)
        assert asked.returncode == 2 and "pass --yes" in asked.stderr, asked.stderr
        # nothing made without consent
        assert bare_second_engine.docker("images", "-q").stdout.strip() == ""

        made = tool.run(
            "provision", "--yes", cwd=tmp_path, DOCKER_HOST=host, COMPOSEGEN_PUBLIC_BASE=source
        )
        _ok(made, "provision --yes")
        assert (
            f"docker pull {source}" in made.stderr
            and f"tagged {source} as {BASE_TAG}" in made.stderr
        ), made.stderr
        assert f"DOCKER_HOST={host}" in made.stdout
        doctor = _ok(
            tool.run("doctor", cwd=tmp_path, DOCKER_HOST=host, COMPOSEGEN_PUBLIC_BASE=source),
            "doctor",
        )
        assert f"ok    base-image  {BASE_TAG}: pulled {source}" in doctor, doctor
        # nothing to do
        again = _ok(tool.run("provision", cwd=tmp_path, DOCKER_HOST=host), "provision again")
        assert again.startswith("ready: ")
    finally:
        _delete_from_registry(source)
    _up_and_down(tool, tmp_path, "starter", host)
    # built there, from that base
    assert "composegen/vllm-emulator" in bare_second_engine.docker("images").stdout
