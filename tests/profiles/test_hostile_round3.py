"""Hostile profiles, round three: identity paths that would hide functional changes, characters YAML
folds or refuses, explicit tags, integers with no digit limit, deep JSON, oversized environment strings,
secrets in emulate.env, extends chains, trust-handing flags, profiles that are not regular files."""

from __future__ import annotations

import os
import time

import pytest
import yaml

from composegen.diff.semantic import FUNCTIONAL, IDENTITY, compare
from composegen.errors import BadInput
from tests.support.caches import own
from tests.support.cli import assert_bad_input, run_inproc
from tests.support.profiles import BASE, edited, project


def _validate(root, *names):
    return run_inproc("--root", str(root), "validate", *names)


# ---------------------------------------------------------------- identity (6)


@pytest.mark.parametrize(
    "path",
    [
        "image",
        "services.vllm.image",
        "services.vllm.image.digest",
        "services.vllm.command",
        "services.vllm.command.--max-model-len",
        "services.*.command.*",
        "services.vllm.volumes",
        "services.vllm.devices",
        "services.vllm.gpus",
        "services.vllm.environment.HF_TOKEN",
        "services.*.environment",
        "services.vllm.privileged",
        "services.vllm.cap_add",
        "services.vllm.security_opt",
        "services.vllm.ipc",
        "services.*",
        "services.*.*",
        "*",
        "services.vll*m.labels*",
    ],
)
def test_identity_paths_that_hide_what_the_stack_runs_with_are_refused(tmp_path, path):
    root = project(tmp_path, edited((("identity",), [path])))
    res = _validate(root)
    assert_bad_input(res, "identity")
    assert "profiles/p.yaml:" in res.stderr


def test_identity_holds_names_ports_labels_and_the_served_name(tmp_path):
    paths = [
        "name",
        "services.vllm.container_name",
        "services.*.ports",
        "services.vllm.labels.run-*",
    ]
    root = project(
        tmp_path, edited((("identity",), [*paths, "services.vllm.command.--served-model-name"]))
    )
    assert _validate(root).returncode == 0


def test_diff_functional_only_cannot_be_silenced_by_identity_paths():
    a = {"services": {"vllm": {"image": "x@sha256:" + "a" * 64, "volumes": ["/a:/data.labels.x"]}}}
    b = {"services": {"vllm": {"image": "x@sha256:" + "b" * 64, "volumes": ["/b:/data.labels.x"]}}}
    with pytest.raises(BadInput):
        compare(a, b, identity_paths=["services.vllm.image"])
    # a glob stays inside its segment: a volume target holding ".labels." is not a label
    assert {c.change_class for c in compare(a, b, identity_paths=["services.*.labels.x"])} == {
        FUNCTIONAL
    }
    ports_a = {"services": {"vllm": {"ports": ["127.0.0.1:1:8000"]}}}
    ports_b = {"services": {"vllm": {"ports": ["127.0.0.1:2:8000", "0.0.0.0:3:9000"]}}}
    classes = {
        c.path: c.change_class
        for c in compare(ports_a, ports_b, identity_paths=["services.*.ports"])
    }
    assert classes["services.vllm.ports.8000/tcp"] == IDENTITY
    # a newly published port is not identity
    assert classes["services.vllm.ports.9000/tcp"] == FUNCTIONAL


# ---------------------------------------------------------------- characters YAML folds or refuses (7, NUL)


@pytest.mark.parametrize(
    "char,name", [("\x85", "U+0085"), ("\u2028", "U+2028"), ("\u2029", "U+2029")]
)
@pytest.mark.parametrize("where", ["value", "comment", "key"])
def test_raw_yaml_line_breaks_are_refused_with_their_line(tmp_path, char, name, where):
    text = yaml.safe_dump(edited((("service", "environment"), {"A": "x"})), sort_keys=False)
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip() == "A: x")
    lines[at] = {
        "value": f"    A: a{char}b",
        "comment": f"    A: x  # note{char}B: y",
        "key": f"    A{char}: x",
    }[where]
    root = project(tmp_path, "\n".join(lines) + "\n")
    res = _validate(root)
    assert_bad_input(res, f"profiles/p.yaml:{at + 1}: {name}")


def test_nul_and_other_controls_give_one_line_with_the_line(tmp_path):
    text = yaml.safe_dump(BASE, sort_keys=False).replace(
        "served_name: tiny", "served_name: ti\x00ny"
    )
    line = text[: text.index("\x00")].count("\n") + 1
    res = _validate(project(tmp_path, text))
    assert_bad_input(res, f"profiles/p.yaml:{line}: NUL")
    res = _validate(project(tmp_path / "b", text.replace("\x00", "\x1b")))
    assert_bad_input(res, f"profiles/p.yaml:{line}: U+001B")


def test_escaped_line_separators_are_kept_exactly(tmp_path):
    env = {"LS": "a\u2028b", "PS": "a\u2029b", "NEL": "a\x85b"}
    # as "\L", "\P", "\N"
    text = yaml.safe_dump(edited((("service", "environment"), env)), sort_keys=False)
    assert "\\L" in text
    root = project(tmp_path, text)
    assert run_inproc("--root", str(root), "render", "p").returncode == 0
    text = (root / "out/p/compose.yaml").read_text(encoding="utf-8")
    # escapes: every YAML reader agrees
    assert "\u2028" not in text and "\\u2028" in text and "\\u0085" in text
    assert own(yaml.safe_load(text)["services"]["vllm"]["environment"]) == env


# ---------------------------------------------------------------- tags, integers, JSON (9, tags)


@pytest.mark.parametrize(
    "snippet",
    [
        "vllm: !!python/object:os.system {}",
        "vllm: !!set {max-num-seqs}",
        "vllm: !!omap [{max-num-seqs: 4}]",
        "service: !mine {port: {host: 39999}}",
        "identity: !!python/tuple [name]",
    ],
)
def test_tags_on_collections_are_refused(tmp_path, snippet):
    text = yaml.safe_dump(
        {k: v for k, v in BASE.items() if k != snippet.split(":")[0]}, sort_keys=False
    )
    assert_bad_input(_validate(project(tmp_path, text + snippet + "\n")), "YAML tag")


def test_an_explicit_null_tag_cannot_remove_an_inherited_flag(tmp_path):
    child = "extends: base\nvllm:\n  max-num-seqs: !!null 4\n"
    root = project(tmp_path, child, name="child", extra={"base": yaml.safe_dump(BASE)})
    assert_bad_input(_validate(root, "child"), "profiles/child.yaml:3: vllm.max-num-seqs: YAML tag")
    root = project(
        tmp_path / "s",
        child.replace("!!null 4", "!!str 4"),
        name="child",
        extra={"base": yaml.safe_dump(BASE)},
    )
    # !!str is how YAML spells a string: allowed
    assert "YAML tag" not in _validate(root, "child").stderr


@pytest.mark.parametrize(
    "number",
    [
        "0x" + "f" * 5000,
        "0" + "7" * 5000,
        "0b" + "1" * 20000,
        ":".join(["59"] * 20000),
        "0x" + "f" * 17,
    ],
)
def test_huge_non_decimal_integers_are_refused_at_once(tmp_path, number):
    text = yaml.safe_dump(BASE, sort_keys=False).replace(
        "max-num-seqs: 4", f"max-num-seqs: {number}"
    )
    started = time.monotonic()
    res = _validate(project(tmp_path, text))
    assert time.monotonic() - started < 5
    assert_bad_input(res, "out of range")
    assert len(res.stderr) < 400


def test_a_100000_deep_json_flag_is_bad_input(tmp_path):
    root = project(
        tmp_path, edited((("vllm", "compilation-config"), "[" * 100_000 + "]" * 100_000))
    )
    assert_bad_input(_validate(root), "vllm.compilation-config")


def test_diff_inputs_with_huge_non_decimal_integers_are_bad_input(tmp_path):
    (tmp_path / "profiles").mkdir()
    good = "services:\n  vllm:\n    image: x\n    shm_size: 1\n"
    (tmp_path / "a.yaml").write_text(good)
    for number in ("0x" + "f" * 5000, ":".join(["59"] * 20000), "1.0e+400"):
        (tmp_path / "b.yaml").write_text(good.replace("shm_size: 1", f"shm_size: {number}"))
        res = run_inproc("--root", str(tmp_path), "diff", "a.yaml", "b.yaml", cwd=tmp_path)
        assert_bad_input(res, "b.yaml:4:")


# ---------------------------------------------------------------- environment, emulate.env


def test_environment_strings_over_the_kernels_limit_are_refused(tmp_path):
    root = project(tmp_path, edited((("service", "environment"), {"BIG": "x" * (128 * 1024)})))
    assert_bad_input(_validate(root), "128 KiB")
    ok = project(tmp_path / "ok", edited((("service", "environment"), {"BIG": "x" * (120 * 1024)})))
    assert _validate(ok).returncode == 0


@pytest.mark.parametrize("value", ["hunter2", "${VLLM_API_KEY}"])
def test_emulate_env_holds_no_secret(tmp_path, value):
    root = project(tmp_path, edited((("emulate", "env"), {"VLLM_API_KEY": value})))
    assert_bad_input(_validate(root), "emulate.env")
    ok = project(tmp_path / "ok", edited((("emulate", "env"), {"EMU_KV_BYTES_PER_TOKEN": "4096"})))
    assert _validate(ok).returncode == 0


def test_a_keyed_api_says_why_it_answers_401_instead_of_polling(tmp_path):
    from composegen.stack import readiness
    from tests.support.emulator_proc import EmulatorProc

    with EmulatorProc.start(tmp_path, env={"VLLM_API_KEY": "k"}) as emu:
        with pytest.raises(readiness.Unauthorized) as caught:
            readiness.models_entry(readiness.Endpoint("127.0.0.1", emu.port), emu.model)
        assert "401" in caught.value.message and "VLLM_API_KEY" in caught.value.hint
        assert (
            readiness.models_entry(readiness.Endpoint("127.0.0.1", emu.port, "k"), emu.model)
            is not None
        )


# ---------------------------------------------------------------- extends, strict warnings


def test_extends_chains_are_bounded_and_linear(tmp_path):
    extra = {"p0": yaml.safe_dump(BASE)} | {f"p{i}": f"extends: p{i - 1}\n" for i in range(1, 400)}
    root = project(tmp_path, "extends: p399\n", name="top", extra=extra)
    started = time.monotonic()
    res = _validate(root, "top")
    assert time.monotonic() - started < 5
    assert_bad_input(res, "extends: a chain of more than 16 profiles")
    assert _validate(root, "p15").returncode == 0


@pytest.mark.parametrize(
    "flags,said",
    [
        ({"trust-remote-code": True}, "trust-remote-code"),
        ({"allowed-local-media-path": "/"}, "allowed-local-media-path"),
        ({"allowed-local-media-path": "//"}, "allowed-local-media-path"),
        ({"allowed-origins": '["*"]', "allow-credentials": True}, "allowed-origins"),
    ],
)
def test_validate_strict_fails_on_flags_that_hand_out_trust(tmp_path, flags, said):
    root = project(tmp_path, edited(*((("vllm", k), v) for k, v in flags.items())))
    assert _validate(root).returncode == 0
    strict = run_inproc("--root", str(root), "validate", "--strict")
    assert strict.returncode == 1 and said in strict.stdout + strict.stderr, (
        strict.stdout,
        strict.stderr,
    )


# ---------------------------------------------------------------- profiles are regular files


@pytest.mark.parametrize("kind", ["kmsg", "fifo", "dir-link"])
def test_a_profile_that_is_not_a_regular_file_is_refused_without_blocking(tmp_path, kind):
    root = project(tmp_path, BASE)
    target = root / "profiles" / "q.yaml"
    if kind == "kmsg":
        target.symlink_to("/proc/kmsg")  # a read would block until the kernel logs something
    elif kind == "fifo":
        os.mkfifo(target)  # a read would block until a writer comes
    else:
        target.symlink_to(root / "profiles" / "p.yaml")
    started = time.monotonic()
    res = _validate(root, "q")
    assert time.monotonic() - started < 5
    assert_bad_input(res, "profiles are regular files inside profiles/")
