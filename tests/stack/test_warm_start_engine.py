"""A rendered stack keeps what its start compiled (docs/caches.md), on the real engine with the emulated
vLLM: `up`, `down`, `up` of the same profile reports `cache: warm` and a shorter compile; another image
digest is another volume, and starts cold."""

from __future__ import annotations

import json
import random
import subprocess

import pytest

from composegen.profiles import caches
from tests.support.engine import emulated_project, force_remove
from tests.support.helpers import run_cli

pytestmark = pytest.mark.docker


def _up(root, name: str) -> dict:
    res = run_cli("--root", str(root), "up", name, "--emulate", "--json")
    assert res.returncode == 0, res.stderr
    down = run_cli("--root", str(root), "down", name)
    assert down.returncode == 0, down.stderr
    return json.loads(res.stdout)["startup"]


def test_a_second_up_is_warm_and_another_image_starts_cold(tmp_path):
    root, name, _ = emulated_project(tmp_path, load=3.0)
    profile = root / "profiles" / f"{name}.yaml"
    # a key no other test shares: this test's batch ceiling
    batched = 4096 + 16 * random.randrange(1, 10_000)
    profile.write_text(
        profile.read_text().replace(
            "max-num-batched-tokens: 4096", f"max-num-batched-tokens: {batched}"
        )
    )
    volumes = []
    try:
        for step in ("cold", "warm", "other image"):
            if step == "other image":
                profile.write_text(profile.read_text().replace("c" * 64, "e" * 64))
            assert run_cli("--root", str(root), "render", name).returncode == 0
            shown = json.loads(run_cli("--root", str(root), "show", name, "--json").stdout)
            volumes.append(shown["caches"]["volume"])
            startup = _up(root, name)
            if step == "cold":
                cold = startup
                assert startup["cache"] == "cold"
            elif step == "warm":
                assert startup["cache"] == "warm"
                assert startup["cache_directory"] == cold["cache_directory"]
                assert startup["compile_seconds"] < cold["compile_seconds"]
            else:
                assert startup["cache"] == "cold" and volumes[2] != volumes[0]
        listed = subprocess.run(["docker", "volume", "ls", "-q"], capture_output=True, text=True)
        assert volumes[0] in listed.stdout.split() and volumes[0].startswith(caches.VOLUME_PREFIX)
    finally:
        force_remove(f"composegen-{name}")
        subprocess.run(["docker", "volume", "rm", *set(volumes)], capture_output=True)
