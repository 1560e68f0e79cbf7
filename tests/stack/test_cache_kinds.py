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


H100 = "NVIDIA H100 80GB HBM3, 580.159.04"  # the GPU and driver of tests/data/real-0.26.0-h100-warmstart


@pytest.mark.parametrize(
    ("smi", "problems", "unchecked"),
    [
        (f"{H100}\n", [], []),
        (
            "NVIDIA H200, 580.159.04\n",
            ["the GPUs are NVIDIA H200, 580.159.04; it was filled on"],
            [],
        ),
        (
            "NVIDIA H100 80GB HBM3, 575.57.08\n",
            ["the GPUs are NVIDIA H100 80GB HBM3, 575.57.08"],
            [],
        ),
        (None, [], ["GPUs not checked: nothing could run nvidia-smi"]),
    ],
)
def test_verify_compares_the_gpus_now_with_those_that_filled_the_volume(
    monkeypatch, smi, problems, unchecked
):
    """`cache verify` of a real start's volume: the GPUs (model, driver) a probe container sees now
    against the record's; one that cannot ask says so instead of passing."""
    from composegen.errors import EngineError
    from composegen.stack import caches as kept
    from composegen.stack import engine
    from composegen.stack.preflight import Check
    from composegen.stack.reports import CacheRecord

    def probe(image, argv, owner, target=None, **host):
        assert argv == kept.ASK_SMI and host["device_requests"][0]["capabilities"] == [["gpu"]]
        if smi is None:
            raise EngineError("probe container with img: could not select device driver")
        return smi

    monkeypatch.setattr(engine, "run_probe", probe)
    monkeypatch.setattr(engine, "image_id", lambda ref, target=None: None)
    monkeypatch.setattr(
        kept, "gpu_check", lambda emulate, on=None: Check("gpus", "ok", "nvidia runtime")
    )
    r = profile.load(Project(REPO), "4096-131k")
    found, said = kept._problems([r], CacheRecord(key=caches.key(r), gpus=[H100]))
    assert len(found) == len(problems)
    assert all(f.startswith(p) for f, p in zip(found, problems, strict=True))
    assert said == unchecked
    assert kept._problems([r], CacheRecord(key="x", gpus=[H100], emulated=True)) == ([], [])


@pytest.mark.parametrize(
    ("figures", "cold"), [({"vllm": 9.94, "emulated": 0.31}, 9.94), ({"emulated": 0.31}, None)]
)
def test_a_record_from_before_the_kinds_is_read_not_refused(tmp_path, figures, cold):
    """Last round's KEY.json served both kinds (a `real` flag, a map of cold figures): a project that
    has one reads the real start's figure from it, never told to remove it."""
    from composegen.stack import caches as stack_caches

    project = Project(tmp_path)
    (tmp_path / "profiles").mkdir()
    old = {"key": "0" * 16, "real": True, "uses": {"p": "2026-12-05T10:00:00Z"}, "cold": figures}
    stack_caches._path(project, "0" * 16, False).write_text(json.dumps(old))
    got = stack_caches.record(project, "0" * 16)
    assert (got.cold, got.uses, got.emulated) == (cold, old["uses"], False)
