"""Rendering: golden files, determinism, drift check, compose validity, atomic writes."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml

from composegen import render
from composegen.profiles import resolve as profile
from composegen.project import Project
from tests.support.cli import run_cli
from tests.support.helpers import MINIMAL, REPO, make_project

SHIPPED = ["393k-gpu", "393k-offload", "4096-131k", "8192-131k", "r33"]


def test_shipped_profiles_render_to_the_committed_out_files():
    project = Project(REPO)
    assert project.profile_names() == sorted([*SHIPPED, "dspark-2x"])
    for name, text in render.render_all(project).items():
        assert project.out_path(name).read_text(encoding="utf-8") == text, f"out/{name} is stale"


def test_fixture_profile_matches_golden_file(tmp_path, data_dir):
    root = make_project(tmp_path, {"tiny": MINIMAL})
    text = render.render_profile_text(root, "tiny")
    assert text == (data_dir / "golden" / "tiny.compose.yaml").read_text(encoding="utf-8")


def test_rendering_is_deterministic_across_processes(tmp_path):
    a = run_cli("--root", str(make_project(tmp_path / "a", {}, copy_shipped=True)), "render")
    b = run_cli("--root", str(make_project(tmp_path / "b", {}, copy_shipped=True)), "render")
    assert a.returncode == b.returncode == 0, a.stderr + b.stderr
    for name in SHIPPED:
        assert (tmp_path / "a/out" / name / "compose.yaml").read_bytes() == (
            tmp_path / "b/out" / name / "compose.yaml"
        ).read_bytes()


def test_argv_is_exec_form_with_model_first():
    doc = yaml.safe_load((REPO / "out/4096-131k/compose.yaml").read_text())
    svc = doc["services"]["vllm"]
    assert svc["entrypoint"] == ["vllm", "serve"]
    assert svc["command"][0] == "deepseek-ai/DeepSeek-V4-Flash-0731"
    assert "--max-num-batched-tokens=4096" in svc["command"]
    assert "--revision=9e165c30e2704aec5d9d593cce3eebd58bbef1cb" in svc["command"]
    assert svc["ports"] == ["127.0.0.1:39071:8000"]
    assert svc["labels"]["io.composegen.profile"] == "4096-131k"
    assert "start_interval" not in svc["healthcheck"]
    assert svc["healthcheck"]["start_period"] == "1800s"
    assert "curl" not in " ".join(svc["healthcheck"]["test"])


def test_header_names_the_source_and_hash():
    r = profile.load(Project(REPO), "393k-gpu")
    first = (REPO / "out/393k-gpu/compose.yaml").read_text().splitlines()[:2]
    assert "profiles/393k-gpu.yaml" in first[0] and "Do not edit" in first[0]
    assert first[1].endswith(f"hash: {r.hash}")


def test_json_flags_are_compact_json_and_speculation_is_removed_by_null():
    r33 = yaml.safe_load((REPO / "out/r33/compose.yaml").read_text())["services"]["vllm"]["command"]
    ctl = yaml.safe_load((REPO / "out/8192-131k/compose.yaml").read_text())["services"]["vllm"][
        "command"
    ]
    assert '--speculative-config={"method":"dspark","num_speculative_tokens":5}' in r33
    assert not any(c.startswith("--speculative-config") for c in ctl)


def test_gpus_attribute_spelling(tmp_path):
    text = MINIMAL.replace("gpus: {count: 1}", 'gpus: {device_ids: ["3"], spelling: gpus}')
    doc = yaml.safe_load(render.render_profile_text(make_project(tmp_path, {"g": text}), "g"))
    svc = doc["services"]["vllm"]
    assert svc["gpus"] == [{"driver": "nvidia", "device_ids": ["3"], "capabilities": ["gpu"]}]
    assert "deploy" not in svc


@pytest.mark.parametrize("cache", ["render cache on", "render cache off"])
def test_check_reports_stale_and_orphan_files(tmp_path, cache):
    env = {"COMPOSEGEN_NO_CACHE": "1"} if cache.endswith("off") else {}
    root = make_project(tmp_path, {"tiny": MINIMAL})
    assert run_cli("--root", str(root), "render", env=env).returncode == 0
    for _ in range(2):  # the second check is answered by the cache when it is on
        assert run_cli("--root", str(root), "render", "--check", env=env).returncode == 0
    path = root / "out/tiny/compose.yaml"
    path.write_text(path.read_text().replace("max-num-seqs=4", "max-num-seqs=5"))
    (root / "out/ghost").mkdir()
    (root / "out/ghost/compose.yaml").write_text("name: x\n")
    res = run_cli("--root", str(root), "render", "--check", env=env)
    assert res.returncode == 1
    assert (
        '-      - "--max-num-seqs=5"' in res.stdout and '+      - "--max-num-seqs=4"' in res.stdout
    )
    assert "out/ghost/compose.yaml" in res.stdout


def test_render_leaves_no_temp_files_and_skips_unchanged(tmp_path):
    root = make_project(tmp_path, {"tiny": MINIMAL})
    first = run_cli("--root", str(root), "render")
    second = run_cli("--root", str(root), "render")
    assert "1 written" in first.stdout and "0 written, 0 removed, 1 unchanged" in second.stdout
    assert [p.name for p in (root / "out/tiny").iterdir()] == ["compose.yaml"]


@pytest.mark.skipif(
    shutil.which("docker-compose") is None and shutil.which("docker") is None,
    reason="no compose binary",
)
@pytest.mark.parametrize("name", SHIPPED)
def test_every_rendered_file_passes_compose_config(name):
    binary = shutil.which("docker-compose")
    argv = [binary] if binary else ["docker", "compose"]
    res = subprocess.run(
        [*argv, "-f", str(REPO / "out" / name / "compose.yaml"), "config", "-q"],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr


def test_profile_schema_file_is_fresh():
    res = run_cli("schema")
    assert res.returncode == 0
    assert (REPO / "profiles/schema.json").read_text() == res.stdout
    for path in (REPO / "profiles").glob("*.yaml"):
        assert path.read_text().startswith("# yaml-language-server: $schema=./schema.json")


def test_render_removes_generated_orphans_and_keeps_foreign_files(tmp_path):
    root = make_project(
        tmp_path, {"tiny": MINIMAL, "gone": MINIMAL.replace("host: 39999", "host: 39998")}
    )
    assert run_cli("--root", str(root), "render").returncode == 0
    (root / "profiles/gone.yaml").unlink()
    (root / "out/handmade").mkdir()
    # not generated by composegen: kept
    (root / "out/handmade/compose.yaml").write_text("name: mine\n")
    check = run_cli("--root", str(root), "render", "--check")
    assert (
        check.returncode == 1
        and "--- a/out/gone/compose.yaml" in check.stdout
        and "+++ /dev/null" in check.stdout
    )
    res = run_cli("--root", str(root), "render")
    assert "removed out/gone/compose.yaml (no profile renders it)" in res.stdout
    assert not (root / "out/gone").exists() and (root / "out/handmade/compose.yaml").exists()


def test_hash_ignores_what_the_engine_never_sees(tmp_path):
    plain = MINIMAL
    annotated = (
        MINIMAL
        + "qualify: {tools: 5}\nemulate: {env: {EMU_LOAD_SECONDS: '1'}}\nidentity: [services.vllm.labels.run]\n"
    )
    a = profile.load(Project(make_project(tmp_path / "a", {"p": plain})), "p")
    b = profile.load(Project(make_project(tmp_path / "b", {"p": annotated})), "p")
    assert a.hash == b.hash
    changed = profile.load(
        Project(
            make_project(
                tmp_path / "c", {"p": MINIMAL.replace("max-num-seqs: 4", "max-num-seqs: 2")}
            )
        ),
        "p",
    )
    assert changed.hash != a.hash
