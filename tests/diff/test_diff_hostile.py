"""Compose inputs to `diff` are bounded: no aliases (an alias bomb is a few lines), no huge or endless files."""

from __future__ import annotations

import subprocess

import pytest

from tests.support.cli import assert_bad_input, run_inproc

GOOD = "services:\n  vllm:\n    image: x\n    command: [org/m, --max-num-seqs=4]\n"
BOMB = (
    "a: &a [x, x, x, x, x, x, x, x, x]\n"
    + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(9)
    )
    + "services:\n  vllm:\n    image: x\n    environment: {A: *j}\n"
)


@pytest.mark.parametrize(
    "text,problem",
    [
        (BOMB, "c.yaml:2: yaml: YAML aliases (*name) are not supported"),
        ("x: &a {k: 1}\nservices:\n  s:\n    <<: *a\n", "c.yaml:4: yaml: YAML aliases"),
        ("services: " + "[" * 5000 + "]" * 5000 + "\n", "c.yaml"),
        ("services:\n  s: {image: x}\n" + "# pad\n" * 200_000, "larger than 1 MiB"),
    ],
    ids=["alias-bomb", "merge-alias", "deep", "huge"],
)
def test_hostile_compose_inputs_are_bad_input(tmp_path, text, problem):
    (tmp_path / "profiles").mkdir()
    (tmp_path / "c.yaml").write_text(text, encoding="utf-8")
    (tmp_path / "good.yaml").write_text(GOOD, encoding="utf-8")
    res = run_inproc(
        "--root", str(tmp_path), "diff", str(tmp_path / "c.yaml"), str(tmp_path / "good.yaml")
    )
    assert_bad_input(res, problem)


def test_anchors_without_aliases_still_diff(tmp_path):
    (tmp_path / "profiles").mkdir()
    (tmp_path / "a.yaml").write_text(GOOD.replace("image: x", "image: &img x"), encoding="utf-8")
    (tmp_path / "b.yaml").write_text(
        GOOD.replace("--max-num-seqs=4", "--max-num-seqs=8"), encoding="utf-8"
    )
    res = run_inproc(
        "--root", str(tmp_path), "diff", str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml")
    )
    assert res.returncode == 1 and "--max-num-seqs" in res.stdout, res.stderr


def test_a_huge_file_at_a_git_revision_is_refused_before_it_is_read(tmp_path):
    (tmp_path / "profiles").mkdir()
    (tmp_path / "good.yaml").write_text(GOOD, encoding="utf-8")
    (tmp_path / "big.yaml").write_text("# pad\n" * 400_000, encoding="utf-8")
    for args in (
        ["init", "-q"],
        ["add", "big.yaml"],
        ["-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "x"],
    ):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)
    res = run_inproc("--root", str(tmp_path), "diff", "HEAD:big.yaml", str(tmp_path / "good.yaml"))
    assert_bad_input(res, "HEAD:big.yaml: git: 'big.yaml' at HEAD is larger than 1 MiB")
