"""An emulated start keeps what it compiled in a volume of its own (KEY-emulated), so a real start of
the profile never loads what the emulator wrote: compose itself, merging the emulate override over the
rendered file, names it so (docs/caches.md)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from composegen.profiles import caches
from composegen.profiles import resolve as profile
from composegen.project import Project
from composegen.stack import emulate

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.docker
@pytest.mark.parametrize("name", ["393k-offload", "4096-131k"])
def test_compose_names_the_emulated_start_a_volume_of_its_own(tmp_path, name):
    r = profile.load(Project(REPO), name)
    override = tmp_path / "emulate.override.yaml"
    override.write_text(emulate.override_text(r, "composegen/vllm-emulator:abc", {}))
    rendered = REPO / "out" / name / "compose.yaml"
    merged = {}
    for files in ([rendered], [rendered, override]):
        argv = [a for f in files for a in ("-f", str(f))]
        config = subprocess.run(
            ["docker", "compose", *argv, "config", "--format", "json"],
            capture_output=True,
            text=True,
            check=True,
        )
        merged[len(files)] = json.loads(config.stdout)["volumes"][caches.MOUNTED]["name"]
    assert merged == {1: caches.volume(r), 2: f"{caches.volume(r)}-emulated"}


def test_no_volume_no_rename(tmp_path):
    from tests.support.helpers import MINIMAL, make_project

    root = make_project(tmp_path, {"off": MINIMAL + "caches: off\n"})
    text = emulate.override_text(profile.load(Project(root), "off"), "img", {})
    assert caches.EMULATED not in text and "\nvolumes:" not in text
