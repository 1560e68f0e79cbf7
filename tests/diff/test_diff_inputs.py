"""What `diff` reads: compose files, git refs, profile names; and bad inputs named by file and line."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from composegen.diff.semantic import FUNCTIONAL, compare, identity_paths_for, load_side
from composegen.errors import BAD_INPUT, BadInput


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


@pytest.fixture
def git_repo(tmp_path: Path, diff_dir: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "out" / "r33").mkdir(parents=True)
    _git(repo, "init", "-q")
    target = repo / "out" / "r33" / "compose.yaml"
    target.write_text((diff_dir / "r33-8192.yaml").read_text())
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "8192")
    target.write_text((diff_dir / "r33-4096.yaml").read_text())
    _git(repo, "commit", "-q", "-am", "4096")
    return repo


def test_git_ref_inputs(git_repo: Path):
    old = load_side("HEAD~1:out/r33/compose.yaml", git_repo)
    new = load_side("HEAD:out/r33/compose.yaml", git_repo)
    assert old.label == "HEAD~1:out/r33/compose.yaml"
    assert "8192" in old.text and old.data["name"] == "r33-batch8192"
    assert [c.path for c in compare(old.data, new.data) if c.change_class == FUNCTIONAL] == [
        "services.vllm.command.--max-num-batched-tokens"
    ]
    # Paths are relative to root, even when root is a subdirectory of the work tree.
    assert load_side("HEAD~1:compose.yaml", git_repo / "out" / "r33").text == old.text


@pytest.mark.parametrize(
    "spec, problem",
    [
        ("nosuchref:out/r33/compose.yaml", "unknown revision 'nosuchref'"),
        ("HEAD:out/r33/missing.yaml", "'out/r33/missing.yaml' does not exist at HEAD"),
        ("HEAD:out/r33", "is a tree at HEAD, not a file"),
    ],
)
def test_bad_git_refs_are_bad_input(git_repo: Path, spec: str, problem: str):
    with pytest.raises(BadInput) as err:
        load_side(spec, git_repo)
    assert err.value.message.startswith(f"{spec}: git: ") and problem in err.value.message
    assert err.value.exit_code == BAD_INPUT


@pytest.mark.parametrize(
    "spec, problem",
    [
        ("HEAD:compose.yaml", "HEAD:compose.yaml: git: {tmp} is not inside a git repository"),
        ("no/such/compose.yaml", "no/such/compose.yaml: diff input: no such file"),
        ("{tmp}/out", "{tmp}/out: diff input: is a directory, not a compose file"),
    ],
)
def test_unreadable_inputs_are_bad_input(tmp_path: Path, spec: str, problem: str):
    (tmp_path / "out").mkdir()
    with pytest.raises(BadInput) as err:
        load_side(spec.format(tmp=tmp_path), tmp_path)
    assert err.value.message == problem.format(tmp=tmp_path)


@pytest.mark.parametrize(
    "text, where",
    [
        ("name: x\nservices:\n  vllm:\n    image: [unclosed\n    command: x\n", ":5: yaml: "),
        ("- just\n- a list\n", ":1: top level:"),
        ("name: x\nservices:\n  - vllm\n", ":2: services:"),
        ("name: x\nservices:\n  vllm: 3\n", ":3: services.vllm:"),
    ],
)
def test_bad_yaml_and_non_compose_documents_name_file_and_line(
    tmp_path: Path, text: str, where: str
):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(BadInput, match=f"^{path}{where}"):
        load_side(str(path), tmp_path)


def test_compose_merge_tags_are_accepted(tmp_path: Path):
    path = tmp_path / "c.yaml"
    path.write_text(
        "services:\n  vllm:\n    ports: !reset []\n    environment: !override {A: '1'}\n"
    )
    assert load_side(str(path), tmp_path).data["services"]["vllm"] == {
        "ports": [],
        "environment": {"A": "1"},
    }


def test_profile_names_are_rendered(monkeypatch, tmp_path: Path, diff_dir: Path):
    seen = []

    def render_profile_text(root, name):
        seen.append((root, name))
        return (diff_dir / "r33-4096.yaml").read_text()

    monkeypatch.setattr("composegen.diff.semantic.render_profile_text", render_profile_text)
    side = load_side("r33-batch4096", tmp_path)
    assert seen == [(tmp_path, "r33-batch4096")]
    assert side.label == "profile:r33-batch4096"
    assert side.data == yaml.safe_load((diff_dir / "r33-4096.yaml").read_text())


def test_identity_paths_come_from_the_profiles_behind_the_inputs(tmp_path: Path, repo_root: Path):
    from composegen.render import render_profile_text

    shutil.copytree(repo_root / "profiles", tmp_path / "profiles")
    (tmp_path / "profiles" / "marked.yaml").write_text(
        'extends: 4096-131k\nidentity: ["services.*.labels.run-id"]\n'
    )
    assert identity_paths_for(tmp_path, ["marked", "4096-131k"]) == ["services.*.labels.run-id"]
    # A rendered file names its profile in the io.composegen.profile label.
    (tmp_path / "c.yaml").write_text(render_profile_text(tmp_path, "marked"))
    assert identity_paths_for(tmp_path, [str(tmp_path / "c.yaml")]) == ["services.*.labels.run-id"]
