"""The scripts keep to their jobs: the demo provisions only the engine, compose and the base image (through
`composegen provision`, the one implementation); the test areas' extras are the test command's alone; no
script state sits at a machine-wide fixed path that two checkouts would share."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.support.helpers import REPO

SCRIPTS = REPO / "scripts"
STEPS = ("docker engine", "compose plugin", "base image")
# What provision says while it makes something (a fresh machine); nothing of the test areas.
ACTIONS = ("apt-get", "starting dockerd", "docker pull", "pull", "no registry", "debootstrap", "docker import",
           "pip install", "uv install")  # fmt: skip


def _called(script: str) -> set[str]:
    """The scripts/ files a script runs, followed through the scripts it runs."""
    seen: set[str] = set()
    todo = [script]
    while todo:
        lines = (SCRIPTS / todo.pop()).read_text().splitlines()
        code = "\n".join(line for line in lines if not line.lstrip().startswith("#"))
        for name in re.findall(r"scripts/([\w.-]+\.sh)", code):
            if name not in seen:
                seen.add(name)
                todo.append(name)
    return seen


def test_the_demo_never_reaches_the_test_areas_provisioning():
    assert _called("demo.sh") == {"setup.sh", "provision.sh"}
    assert "provision-tests.sh" in _called("test.sh")
    assert "provision.d" not in (SCRIPTS / "provision.sh").read_text().replace(
        "provision-tests.sh", ""
    )


def test_provision_sh_is_composegen_provision():
    text = (SCRIPTS / "provision.sh").read_text()
    commands = [
        line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")
    ]
    assert any("-m composegen provision --yes" in line for line in commands)
    assert not any(
        word in text for word in ("debootstrap --", "docker import", "cli-plugins", "apt-get")
    )


def test_no_script_keeps_state_at_a_fixed_machine_wide_path():
    scripts = [*SCRIPTS.glob("*.sh"), *SCRIPTS.glob("provision.d/*.sh")]
    assert len(scripts) >= 5, scripts  # the loop below proves nothing on an empty folder
    for path in scripts:
        assert not re.search(r"/var/(lib|log)/composegen", path.read_text()), path


@pytest.mark.docker
def test_provision_sh_makes_only_what_the_stacks_need():
    # the caller's DOCKER_HOST/DOCKER_CONTEXT pass through
    env = {**os.environ, "PYTHON": sys.executable}
    res = subprocess.run(
        ["bash", str(SCRIPTS / "provision.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    lines = res.stderr.splitlines()
    said = [line.removeprefix("provision: ") for line in lines if line.startswith("provision: ")]
    assert [s.split(":")[0] for s in said if s.split(":")[0] in STEPS] == list(STEPS), res.stderr
    assert all(s.startswith((*STEPS, *ACTIONS)) for s in said), res.stderr
    assert (
        lines[-1].startswith("ready: docker engine ")
        and "base image composegen/base:py3" in lines[-1]
    )
    assert not re.search(
        r"(?m)^provision: (chromium|registry|tmux|sshd|prometheus):", res.stderr
    ), res.stderr
