"""A profile is data: no key or value changes the stack's shape (YAML injection), becomes a vLLM option it
was not meant to be (argv injection), is interpolated by compose (`$`), or reaches outside the project."""

from __future__ import annotations

import shutil

import pytest

from composegen.diff.argv import parse_vllm_args
from tests.support.caches import own
from tests.support.cli import assert_bad_input, run_inproc
from tests.support.helpers import REPO
from tests.support.profiles import edited, project, rendered

# What a newline in a key or value would smuggle in, were it pasted as text.
INJECT = "x\n    privileged: true\n    pid: host\n#"
QUOTED = 'x"\n    privileged: true\n    pid: "host'
SERVICE_KEYS = {
    "image", "container_name", "entrypoint", "command", "ports", "environment", "volumes", "ipc", "shm_size",
    "init", "ulimits", "deploy", "gpus", "stop_grace_period", "restart", "healthcheck", "labels",
}  # fmt: skip


def _render(root, name="p"):
    return run_inproc("--root", str(root), "render", name)


def _assert_shape_kept(root, name="p"):
    """The rendered file has only the keys the template writes: nothing was injected."""
    doc = rendered(root, name)
    assert set(doc) <= {"name", "services", "volumes"}, doc.keys()
    assert set(doc["services"]) == {"vllm"}
    service = doc["services"]["vllm"]
    assert set(service) <= SERVICE_KEYS, set(service) - SERVICE_KEYS
    return service


# ---------------------------------------------------------------- class 1: keys and values as text


@pytest.mark.parametrize(
    "keys,value,problem",
    [
        (("service", "environment"), {INJECT: "1"}, "not an environment variable name"),
        (("service", "environment"), {"": "1"}, "not an environment variable name"),
        (("service", "environment"), {"A=B": "1"}, "not an environment variable name"),
        (("service", "ulimits"), {INJECT: 1}, "is not a Docker ulimit"),
        (("service", "ulimits"), {"nofile2": 1}, "is not a Docker ulimit"),
        (("emulate", "env"), {INJECT: "1"}, "not an environment variable name"),
        (
            ("service", "volumes"),
            [{"source": "vol\n  privileged: true", "target": "/x"}],
            "control characters",
        ),
        (("service", "volumes"), [{"source": "my vol", "target": "/x"}], "neither a path"),
        (
            ("service", "volumes"),
            [{"source": "/a", "target": "/x:/etc"}],
            "service.volumes.0.target",
        ),
        (("service", "environment"), {"A": "line\nbreak"}, "control characters"),
    ],
)
def test_keys_and_values_that_are_not_their_grammar_are_refused(tmp_path, keys, value, problem):
    root = project(tmp_path, edited((keys, value)))
    for command in ("validate", "render"):
        assert_bad_input(run_inproc("--root", str(root), command), problem)
    assert not (root / "out").exists()


@pytest.mark.parametrize(
    "payload", [INJECT, QUOTED, "a: b", "{x: 1}", "[1]", "- x", "*alias", "&anchor", "!!python"]
)
@pytest.mark.parametrize(
    "keys",
    [
        ("description",),
        ("model", "served_name"),
        ("service", "container_name"),
        ("vllm", "tokenizer"),
        ("vllm", "ignore-patterns"),
        ("vllm", "speculative-config"),
        ("service", "gpus", "driver"),
        ("service", "stop_grace_period"),
        ("image",),
    ],
)
def test_no_value_can_change_the_files_shape(tmp_path, keys, payload):
    value: object = payload
    if keys[-1] == "ignore-patterns":
        value = ["*.pt", payload]
    elif keys[-1] == "speculative-config":
        value = {"method": payload}
    root = project(tmp_path, edited((keys, value)))
    res = _render(root)
    if res.returncode == 2:
        assert_bad_input(res)
        assert not (root / "out").exists()
        return
    assert res.returncode == 0, res.stderr
    service = _assert_shape_kept(root)
    assert "privileged" not in service and "pid" not in service


def test_environment_values_stay_values(tmp_path):
    env = {
        "A": 'quote " and \\ backslash',
        "B": "a: b",
        "C": "#not a comment",
        "TRUE": "yes",
        "on": "off",
    }
    root = project(tmp_path, edited((("service", "environment"), env)))
    assert _render(root).returncode == 0
    # keys like TRUE/on stay strings, values verbatim
    assert own(_assert_shape_kept(root)["environment"]) == env


# ---------------------------------------------------------------- class 2: argv


@pytest.mark.parametrize(
    "keys,value,problem",
    [
        (
            ("vllm", "ignore-patterns"),
            ["*.pt", "--api-key=hunter2"],
            "vllm.ignore-patterns: item '--api-key=hunter2'",
        ),
        (("vllm", "ignore-patterns"), ["-x"], "vllm.ignore-patterns"),
        (("vllm", "lora-modules"), ["a=b", "--enable-x"], "vllm.lora-modules"),
        (("model", "path"), "--api-key=hunter2", "model.path"),
        (("model", "path"), "-m", "model.path"),
        (("model", "path"), "relative/path", "model.path"),
        (("model", "id"), "--api-key=hunter2", "model.id"),
        (("model", "id"), "-x", "model.id"),
        (("model", "served_name"), "--api-key=hunter2", "model.served_name"),
        (("model", "served_name"), "two words", "model.served_name"),
        (("vllm", "tokenizer"), "a\x00b", "vllm.tokenizer"),
    ],
)
def test_values_that_would_become_options_are_refused(tmp_path, keys, value, problem):
    root = project(tmp_path, edited((keys, value)))
    assert_bad_input(_render(root), problem)
    assert not (root / "out").exists()


@pytest.mark.parametrize(
    "flag,value",
    [
        ("tokenizer", "--api-key=hunter2"),
        ("chat-template", "-x"),
        ("speculative-config", {"method": "--api-key=hunter2", "x": ["--y"]}),
        ("ignore-patterns", ["*.pt", "a=--b"]),
    ],
)
def test_option_like_text_inside_a_value_stays_that_flags_value(tmp_path, flag, value):
    root = project(tmp_path, edited((("vllm", flag), value)))
    assert _render(root).returncode == 0
    parsed = parse_vllm_args(_assert_shape_kept(root)["command"])
    assert parsed["model"] == "org/model" and parsed["args"] == []
    expected = {"max-model-len", "max-num-batched-tokens", "max-num-seqs", flag}
    expected |= {"host", "port", "revision", "served-model-name"}
    assert set(parsed["flags"]) == {f"--{f}" for f in expected}
    assert parsed["flags"][f"--{flag}"] == value  # JSON values come back parsed


# ---------------------------------------------------------------- class 3: `$`


def test_dollar_is_literal_except_in_allowed_references(tmp_path):
    doc = edited(
        (("service", "environment"), {"PW": "pa$word", "HF_TOKEN": "${HF_TOKEN}", "MIX": "a${HOME}b"}),
        (
            ("service", "volumes"),
            [{"source": "${HF_HOME:-~/.cache/hf}", "target": "/hf"}, {"source": "/d/x", "target": "/d/${HOME}"}],
        ),
        (
            ("service", "unsafe_mounts"),
            [{"source": s, "reason": "a test of $"} for s in ("${HF_HOME:-~/.cache/hf}", "/d/x")],
        ),
        (("model", "served_name"), "${HOME}"),
        (("vllm", "tokenizer"), "org/tok$1"),
    )  # fmt: skip
    root = project(tmp_path, doc)
    assert _render(root).returncode == 0
    service = _assert_shape_kept(root)
    assert own(service["environment"]) == {
        "PW": "pa$$word",
        "HF_TOKEN": "${HF_TOKEN}",
        "MIX": "a$${HOME}b",
    }
    # targets never interpolate
    assert service["volumes"] == [
        "${HF_HOME:-~/.cache/hf}:/hf",
        "/d/x:/d/$${HOME}",
        "composegen-cache:/composegen-cache",
    ]
    assert "$${HOME}" in service["command"] and "--tokenizer=org/tok$$1" in service["command"]
    assert service["labels"]["io.composegen.served-name"] == "$${HOME}"


def test_show_masks_the_values_of_secret_references(tmp_path):
    secret = "hf_the_real_token_123"
    doc = edited(
        (("service", "environment"), {"HF_TOKEN": "${HF_TOKEN:-}"}),
        (("description",), f"pasted by mistake: {secret}"),
        (("vllm", "tokenizer"), f"org/{secret}"),
    )
    root = project(tmp_path, doc)
    for args in (["show", "p"], ["show", "p", "--json"]):
        res = run_inproc("--root", str(root), *args, env={"HF_TOKEN": secret})
        assert res.returncode == 0, res.stderr
        assert secret not in res.stdout and "***" in res.stdout
    assert secret in run_inproc("--root", str(root), "show", "p", env={"HF_TOKEN": "other"}).stdout


# ---------------------------------------------------------------- class 4: paths and names


@pytest.mark.parametrize(
    "name", ["../x", "../../etc/passwd", "/tmp/x", "a/b", "BIG", "a.b", "with space", "naïve", ""]
)
def test_profile_names_outside_the_grammar_are_refused_and_write_nothing(tmp_path, name):
    root = project(tmp_path / "proj", edited())
    for command in (["render", name], ["show", name], ["validate", name]):
        res = run_inproc("--root", str(root), *command)
        assert_bad_input(res)
    assert not (root / "out").exists() and sorted(p.name for p in tmp_path.iterdir()) == ["proj"]


@pytest.mark.parametrize("stem", ["BIG", "a.b", "Big-One"])
def test_profile_files_with_names_outside_the_grammar_fail_validation(tmp_path, stem):
    root = project(tmp_path, edited(), name=stem)
    assert_bad_input(run_inproc("--root", str(root), "validate"), "is not a profile name")


def test_extends_cannot_leave_profiles(tmp_path):
    (tmp_path / "elsewhere.yaml").write_text("image: evil\n", encoding="utf-8")
    root = project(tmp_path / "proj", {"extends": "../../elsewhere", **edited()})
    assert_bad_input(
        run_inproc("--root", str(root), "validate", "p"),
        "profiles/p.yaml:1: extends: '../../elsewhere'",
    )


def test_node_names_follow_the_project_grammar(tmp_path):
    nodes = {
        "master_addr": "10.0.0.1",
        "members": [{"name": "a.b", "rank": 0}, {"name": "c", "rank": 1}],
    }
    root = project(tmp_path, edited((("nodes",), nodes), (("vllm", "tensor-parallel-size"), 2)))
    assert_bad_input(run_inproc("--root", str(root), "validate"), "nodes.members.0.name")


def test_render_never_writes_through_a_symlink_under_out(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    root = project(tmp_path / "proj", edited())
    (root / "out").mkdir()
    (root / "out" / "p").symlink_to(outside)
    assert_bad_input(_render(root), "out/p: is a symbolic link")
    assert list(outside.iterdir()) == []
    (root / "out" / "p").unlink()
    (root / "out").rmdir()
    (root / "out").symlink_to(outside)
    assert_bad_input(_render(root), "out: is a symbolic link")
    assert list(outside.iterdir()) == []


def test_render_never_removes_through_a_symlinked_orphan(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "compose.yaml"
    victim.write_text(
        "# Generated by composegen from profiles/gone.yaml. Do not edit\n", encoding="utf-8"
    )
    root = project(tmp_path / "proj", edited())
    (root / "out").mkdir()
    (root / "out" / "gone").symlink_to(outside)
    res = run_inproc("--root", str(root), "render")
    assert res.returncode == 0 and "removed" not in res.stdout.split("\n")[0], res.stdout
    assert victim.is_file()


def test_profiles_whose_compose_projects_collide_are_named(tmp_path):
    nodes = {
        "master_addr": "10.0.0.1",
        "members": [{"name": "b-c", "rank": 0}, {"name": "d", "rank": 1}],
    }
    pair = edited(
        (("nodes",), nodes),
        (("vllm", "tensor-parallel-size"), 2),
        (("service", "port", "host"), 39998),
    )
    root = project(tmp_path, edited(), name="a-b-c")
    root = project(tmp_path, pair, name="a")
    res = run_inproc("--root", str(root), "validate", "--strict")
    assert (
        res.returncode == 1 and "a/b-c, a-b-c share compose project composegen-a-b-c" in res.stdout
    ), res.stdout


def test_evidence_never_writes_through_a_symlinked_runs_dir(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "proj"
    shutil.copytree(REPO / "profiles", root / "profiles")
    (root / "runs").symlink_to(outside)
    log = REPO / "tests/data/logs/vllm-0.33.0-r33-4096-arm.log"
    res = run_inproc(
        "--root", str(root), "evidence", "--from-log", str(log), "--profile", "4096-131k"
    )
    assert_bad_input(res, "runs: is a symbolic link")
    assert list(outside.iterdir()) == []
