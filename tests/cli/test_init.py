"""`composegen init`: a starter project that validates, renders a file compose accepts, and is never clobbered."""

from __future__ import annotations

import re
import subprocess

from tests.support.cli import run_cli


def test_init_scaffolds_a_project_that_validates_and_renders(tmp_path):
    res = run_cli("init", str(tmp_path), "--name", "first")
    assert res.returncode == 0, res.stderr
    profile = (tmp_path / "profiles" / "first.yaml").read_text()
    assert profile.startswith("# yaml-language-server: $schema=./schema.json")
    assert (tmp_path / "profiles" / "schema.json").is_file()
    # rendered already: `up first` can run
    assert (tmp_path / "out" / "first" / "compose.yaml").is_file()
    assert run_cli("--root", str(tmp_path), "render", "--check").returncode == 0
    # Every field of the starter carries a comment, so a newcomer reads what it means.
    fields = [
        line
        for line in profile.splitlines()
        if line.strip() and not line.lstrip().startswith(("#", "-"))
    ]
    uncommented = [line for line in fields if "#" not in line and not line.rstrip().endswith(":")]
    assert len(uncommented) <= len(fields) // 3, uncommented
    assert run_cli("--root", str(tmp_path), "validate", "first").returncode == 0
    assert run_cli("--root", str(tmp_path), "render", "first").returncode == 0
    compose = tmp_path / "out" / "first" / "compose.yaml"
    check = subprocess.run(
        ["docker", "compose", "-f", str(compose), "config", "-q"], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stderr


def test_init_refuses_a_project_that_has_profiles(tmp_path):
    assert run_cli("init", str(tmp_path)).returncode == 0
    before = (tmp_path / "profiles" / "starter.yaml").read_bytes()
    res = run_cli("init", str(tmp_path))
    assert (
        res.returncode == 2
        and "already holds profiles" in res.stderr
        and "Traceback" not in res.stderr
    )
    assert (tmp_path / "profiles" / "starter.yaml").read_bytes() == before


def test_init_refuses_a_name_compose_cannot_use(tmp_path):
    res = run_cli("init", str(tmp_path), "--name", "Big Model")
    assert res.returncode == 2 and "--name" in res.stderr
    assert not (tmp_path / "profiles").exists()


def test_the_starters_placeholders_fail_strict_and_it_points_only_at_what_the_project_has(tmp_path):
    assert run_cli("init", str(tmp_path), "--name", "first").returncode == 0
    profile = (tmp_path / "profiles" / "first.yaml").read_text()
    assert "docs/" not in profile  # a new project has no docs/ directory
    for pointer in re.findall(r"profiles/[\w.-]+", profile):
        assert (tmp_path / pointer).exists(), pointer
    # Pin the image as a user would: the all-zeros revision alone must still fail --strict.
    pinned = profile.replace(
        "image: vllm/vllm-openai:v0.33.0", "image: vllm/vllm-openai@sha256:" + "a" * 64
    )
    pinned = "\n".join(
        line for line in pinned.splitlines() if not line.startswith("image_unpinned_reason")
    )
    (tmp_path / "profiles" / "first.yaml").write_text(pinned + "\n")
    strict = run_cli("--root", str(tmp_path), "validate", "--strict", "first")
    assert strict.returncode == 1, strict.stdout + strict.stderr
    assert "model.revision is all zeros, a placeholder" in strict.stdout
    (tmp_path / "profiles" / "first.yaml").write_text(
        pinned.replace("0" * 40, "c1899de289a04d12100db370d81485cdf75e47ca")
    )
    assert run_cli("--root", str(tmp_path), "validate", "--strict", "first").returncode == 0


def test_init_says_next_what_the_readme_quick_start_says(tmp_path):
    """The README's installed-tool quick start goes init -> doctor -> up starter --emulate; init's
    `next:` is that, runnable as printed (a `cd` when the project is elsewhere)."""
    from tests.support.helpers import REPO

    readme = (REPO / "README.md").read_text()
    here = run_cli("init", cwd=tmp_path)
    assert here.returncode == 0, here.stderr
    (line,) = [x for x in here.stdout.splitlines() if x.startswith("next: ")]
    steps = line.removeprefix("next: ").split(" && ")
    assert steps == ["composegen doctor", "composegen up starter --emulate"], line
    quick = readme.split("## As an installed tool", 1)[1].split("\n## ", 1)[0]
    assert all(f"\n{step} " in quick for step in steps), quick
    elsewhere = run_cli("init", str(tmp_path / "other"), "--name", "mine", cwd=tmp_path)
    assert (
        f"next: cd {tmp_path / 'other'} && composegen doctor && composegen up mine --emulate"
        in (elsewhere.stdout)
    )


def test_the_install_pages_install_only_what_exists():
    """composegen is not on PyPI: every install line of the README and docs/install.md installs the
    wheel a clone builds, never a package name an index would be asked for."""
    from tests.support.helpers import REPO

    for page in ("README.md", "docs/install.md"):
        text = " ".join((REPO / page).read_text().split())
        # what each install installs, after its options (`--find-links DIR` takes a value)
        installs = re.findall(
            r"(?:pipx install|uv tool install)(?: --[\w-]+(?: [A-Z]+\b)?)* ([^\s`]+)", text
        )
        assert installs, page
        assert set(installs) == {"dist/composegen-*.whl"}, (page, installs)
        assert "not published" in text, page
