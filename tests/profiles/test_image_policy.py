"""`image_policy: local-build`, the reviewed opt-in for an image the host builds itself (no registry, so
no digest): `validate --strict` passes and shows it, the stack never pulls the tag, `diff` calls turning it
on or off functional, and `status` shows it. Informational notes (the offload's /dev/shm) never fail
--strict. And every shipped profile passes `validate --strict`."""

from __future__ import annotations

import json
import subprocess
import uuid

import pytest
import yaml

from tests.support.cli import assert_bad_input, run_cli, run_inproc
from tests.support.helpers import REPO, make_project
from tests.support.profiles import edited, project, rendered

REASON = "built on each node from the recipe; no registry holds it"
TAGGED = (("image",), "vllm-local:stage-c"), (("image_unpinned_reason",), REASON)
LOCAL = edited(*TAGGED, (("image_policy",), "local-build"))


def test_every_shipped_profile_passes_validate_strict():
    res = run_inproc("--root", str(REPO), "validate", "--strict", "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    report = json.loads(res.stdout)
    assert report["warnings"] == [] and all(p["warnings"] == [] for p in report["profiles"])
    by_name = {p["name"]: p for p in report["profiles"]}
    assert (
        by_name["dspark-2x"]["image_policy"] == "local-build" and not by_name["dspark-2x"]["pinned"]
    )
    assert any("/dev/shm" in n for n in by_name["393k-offload"]["notes"])  # said, as a note


def test_a_tag_without_the_opt_in_still_fails_strict(tmp_path):
    res = run_inproc("--root", str(project(tmp_path, edited(*TAGGED))), "validate", "--strict", "p")
    assert res.returncode == 1 and "--strict: unpinned image in p" in res.stderr, (
        res.stdout + res.stderr
    )


def test_local_build_passes_strict_and_says_so(tmp_path):
    res = run_inproc("--root", str(project(tmp_path, LOCAL)), "validate", "--strict", "p")
    assert res.returncode == 0, res.stdout + res.stderr
    assert (
        f"note: image 'vllm-local:stage-c' is built locally (image_policy: local-build): {REASON}"
        in res.stdout
    )


@pytest.mark.parametrize(
    ("edits", "said"),
    [
        ([(("image",), "example/vllm@sha256:" + "a" * 64)], "this one is pinned"),
        ([(("image_unpinned_reason",), None)], "needs image_unpinned_reason"),
        ([(("image_unpinned_reason",), "   ")], "needs image_unpinned_reason"),
        (
            [(("image",), "registry.example.com/vllm:stage-c")],
            "names a registry (registry.example.com)",
        ),
        ([(("image",), "localhost:5000/vllm:stage-c")], "names a registry (localhost:5000)"),
        ([(("image_policy",), "trust-me")], "image_policy"),
    ],
)
def test_local_build_is_for_a_locally_built_tag_only(tmp_path, edits, said):
    doc = edited(*edits, base=LOCAL)
    res = run_inproc("--root", str(project(tmp_path, doc)), "validate", "p")
    assert_bad_input(res, "image_policy")
    assert said in res.stderr, res.stderr


def test_the_stack_never_pulls_it_and_diff_calls_the_opt_in_functional(tmp_path):
    on, off = project(tmp_path / "on", LOCAL), project(tmp_path / "off", edited(*TAGGED))
    for root in (on, off):
        assert run_inproc("--root", str(root), "render", "p").returncode == 0
    vllm = rendered(on)["services"]["vllm"]
    assert (
        vllm["pull_policy"] == "never"
        and vllm["labels"]["io.composegen.image-policy"] == "local-build"
    )
    assert "pull_policy" not in rendered(off)["services"]["vllm"]
    a, b = on / "out/p/compose.yaml", off / "out/p/compose.yaml"
    res = run_inproc("--root", str(on), "diff", str(a), str(b), "--functional-only", "--json")
    assert res.returncode == 1, res.stdout + res.stderr
    functional = {c["path"] for c in json.loads(res.stdout) if c["class"] == "functional"}
    assert {
        "services.vllm.labels.io.composegen.image-policy",
        "services.vllm.pull_policy",
    } <= functional
    check = subprocess.run(
        ["docker", "compose", "-f", str(a), "config", "-q"], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stderr


@pytest.mark.docker
def test_status_shows_the_image_policy(tmp_path):
    name = f"t-{uuid.uuid4().hex[:8]}"
    root = make_project(tmp_path, {name: yaml.safe_dump(LOCAL, sort_keys=False)})
    project_name = f"composegen-{name}"
    network = f"{project_name}_default"
    label = f"com.docker.compose.project={project_name}"
    subprocess.run(
        ["docker", "network", "create", "--label", label, network], check=True, capture_output=True
    )
    try:
        res = run_cli("--root", str(root), "status", name, "--json")
        [stack] = json.loads(res.stdout)["stacks"]
        assert stack["image_policy"] == "local-build", res.stdout
        text = run_cli("--root", str(root), "status", name).stdout
        assert f"{name}: image not pinned by digest (image_policy: local-build)" in text
    finally:
        subprocess.run(["docker", "network", "rm", network], capture_output=True)
