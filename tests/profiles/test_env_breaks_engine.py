"""Characters YAML 1.1 folds (U+0085, U+2028, U+2029), written as escapes in a profile, reach the container's
environment exactly: a real `docker compose create` and `docker inspect`, as the `$` test does."""

from __future__ import annotations

import json
import os
import subprocess
import uuid

import pytest
import yaml

from tests.support.cli import run_inproc
from tests.support.profiles import edited, project

pytestmark = pytest.mark.docker

ENV = {"NEL": "a\x85b", "LS": "a\u2028b", "PS": "a\u2029b", "MIX": "x\u2028\u2029\x85$y"}


def test_yaml_line_breaks_in_environment_values_reach_the_container_exactly(tmp_path):
    name = f"breaks{uuid.uuid4().hex[:8]}"
    doc = edited(
        (("image",), "composegen/base:py3"),
        (("image_unpinned_reason",), "a local test image"),
        (("service", "environment"), ENV),
        (("service", "gpus"), {"count": 1, "spelling": "gpus"}),
    )
    # escapes: "\N", "\L", "\P"
    root = project(tmp_path, yaml.safe_dump(doc, sort_keys=False), name=name)
    assert run_inproc("--root", str(root), "render", name).returncode == 0
    compose = ["docker", "compose", "-f", str(root / "out" / name / "compose.yaml")]
    env = {**os.environ}  # the caller's DOCKER_HOST / DOCKER_CONTEXT
    try:
        created = subprocess.run(
            [*compose, "create"], capture_output=True, text=True, env=env, timeout=120
        )
        assert created.returncode == 0, created.stderr
        ids = subprocess.run(
            [*compose, "ps", "-aq"], capture_output=True, text=True, env=env, timeout=60
        )
        raw = subprocess.run(
            ["docker", "inspect", ids.stdout.split()[0]], capture_output=True, env=env
        ).stdout
        held = dict(item.split("=", 1) for item in json.loads(raw)[0]["Config"]["Env"])
        assert {k: held.get(k) for k in ENV} == {**ENV, "MIX": "x\u2028\u2029\x85$y"}
    finally:
        subprocess.run(
            [*compose, "down", "-v", "--remove-orphans"], capture_output=True, env=env, timeout=120
        )
