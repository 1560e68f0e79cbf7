"""A rendered stack keeps what its start compiled (docs/caches.md), on the real engine with the emulated
vLLM: `up`, `down`, `up` of the same profile reports `cache: warm` and a shorter compile; another image
digest is another volume, and starts cold."""

from __future__ import annotations

import json
import random
import subprocess

import pytest

from composegen.profiles import caches
from tests.support.cli import run_cli
from tests.support.engine import emulated_project, force_remove, free_port

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
    batched = 4096 + 16 * random.randrange(1, 64)  # the emulated memory holds it
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


def test_a_renamed_copy_shares_the_volume_and_starts_warm(tmp_path):
    root, name, port = emulated_project(tmp_path, load=3.0)
    profile = root / "profiles" / f"{name}.yaml"
    batched = 4096 + 16 * random.randrange(1, 64)  # the emulated memory holds it
    text = profile.read_text().replace(
        "max-num-batched-tokens: 4096", f"max-num-batched-tokens: {batched}"
    )
    profile.write_text(text)
    copy = f"{name}-b"  # another name, served name and port: the same compiled code
    other = free_port()
    (root / "profiles" / f"{copy}.yaml").write_text(
        text.replace(f"{name}-served", f"{copy}-served").replace(f"host: {port}", f"host: {other}")
    )
    assert run_cli("--root", str(root), "render").returncode == 0
    shown = [
        json.loads(run_cli("--root", str(root), "show", n, "--json").stdout)["caches"]["volume"]
        for n in (name, copy)
    ]
    try:
        assert shown[0] == shown[1]
        assert _up(root, name)["cache"] == "cold"
        assert _up(root, copy)["cache"] == "warm"
    finally:
        for n in (name, copy):
            force_remove(f"composegen-{n}")
        subprocess.run(["docker", "volume", "rm", shown[0]], capture_output=True)
