"""Damaged run bundles (hand-edited, truncated, hostile) are bad input: exit 2, one line naming the file and
the field, from every command that loads them (compare, plan); NaN never passes as a measurement."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.support.cli import assert_bad_input, run_inproc
from tests.support.helpers import REPO

LOG = REPO / "tests/data/logs/vllm-0.33.0-r33-4096-arm.log"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    root = tmp_path_factory.mktemp("proj")
    shutil.copytree(REPO / "profiles", root / "profiles")
    res = run_inproc(
        "--root", str(root), "evidence", "--from-log", str(LOG), "--profile", "4096-131k", "--json"
    )
    assert res.returncode == 0, res.stderr
    return root, root / json.loads(res.stdout)["path"]


def damaged(bundle, tmp_path, keys: tuple, raw_json: str) -> tuple:
    """A copy of the bundle whose evidence.json holds `raw_json` (JSON text, written as is) at `keys`."""
    root, run = bundle
    copy = tmp_path / run.name
    shutil.copytree(run, copy)
    doc = json.loads((copy / "evidence.json").read_text())
    node = doc
    for key in keys[:-1]:
        node = node[key]
    node[keys[-1]] = "@@VALUE@@"
    text = json.dumps(doc, indent=2).replace('"@@VALUE@@"', raw_json)
    (copy / "evidence.json").write_text(text)
    return root, copy


DEEP = "[" * 40 + "]" * 40
ABYSS = "[" * 200_000 + "]" * 200_000

CASES = [
    (("startup", "kv_cache_gib_min"), "NaN", "startup.kv_cache_gib_min: nan is not a number"),
    (("startup", "kv_cache_gib_min"), "Infinity", "startup.kv_cache_gib_min: inf is not a number"),
    (("startup", "kv_cache_gib_min"), '"12.5"', "startup.kv_cache_gib_min"),
    (("startup", "kv_cache_gib_min"), "9" * 5000, "evidence: unreadable JSON"),
    (("startup", "kv_cache_tokens"), str(2**64), "startup.kv_cache_tokens: integer out of range"),
    (("startup", "kv_cache_tokens"), "1.5", "startup.kv_cache_tokens"),
    (("startup", "kv_cache_tokens"), "-5", "startup.kv_cache_tokens"),
    (("startup", "kv_cache_tokens"), "true", "startup.kv_cache_tokens"),
    (("startup", "max_model_len"), '"big"', "startup.max_model_len"),
    (("startup", "effective_args"), DEEP, "startup.effective_args"),
    (("startup", "effective_args"), ABYSS, "evidence: unreadable JSON"),
    (("startup",), "[]", "startup"),
    (("gates",), '{"passed": "1", "total": 2}', "gates.passed"),
    (("gates",), '{"passed": NaN, "total": 2}', "gates.passed: nan"),
    (("ladder",), '{"targets": [{"prompt_tokens": "big"}]}', "ladder.targets.0.prompt_tokens"),
    (("ladder",), '{"targets": "x"}', "ladder.targets"),
    (("profile",), '{"name": 5, "hash": "x"}', "profile.name"),
    (("source",), '"elsewhere"', "source"),
    (("created_at",), "5", "created_at"),
    (("unknown",), "[1]", "unknown.0"),
    (("raw",), '[{"file": "../../etc/passwd", "sha256": "' + "0" * 64 + '"}]', "raw.0.file"),
    (("compose_sha256",), '"not hex"', "compose_sha256"),
]


@pytest.mark.parametrize(
    "keys,raw_json,problem", CASES, ids=[f"{'.'.join(c[0])}={c[1][:12]}" for c in CASES]
)
def test_a_damaged_bundle_is_one_line_exit_2_from_compare_and_plan(
    bundle, tmp_path, keys, raw_json, problem
):
    root, run = damaged(bundle, tmp_path, keys, raw_json)
    for args in (["compare", str(run), str(bundle[1])], ["plan", "393k-gpu", "--from", str(run)]):
        res = run_inproc("--root", str(root), *args)
        assert_bad_input(res, problem)
        assert f"{run}/evidence.json" in res.stderr


def test_the_intact_bundle_still_compares_and_plans(bundle):
    root, run = bundle
    assert run_inproc("--root", str(root), "compare", str(run), str(run)).returncode == 0
    assert run_inproc("--root", str(root), "plan", "393k-gpu", "--from", str(run)).returncode in (
        0,
        1,
    )


def test_a_bundle_never_keeps_the_value_of_a_secret_reference(tmp_path):
    secret = "hf_secret_value_4242"
    root = tmp_path / "proj"
    shutil.copytree(REPO / "profiles", root / "profiles")
    log = tmp_path / "startup.log"
    log.write_text(
        LOG.read_text().replace("deepseek-ai/DeepSeek-V4-Flash-0731", f"deepseek-ai/{secret}")
    )
    refused = run_inproc(
        "--root",
        str(root),
        "evidence",
        "--from-log",
        str(log),
        "--profile",
        "r33",
        env={"HF_TOKEN": secret},
    )  # another model than the profile's: refused, and the refusal masks the value too
    assert (
        refused.returncode == 2
        and "model" in refused.stderr
        and secret not in refused.stderr + refused.stdout
    )
    res = run_inproc(
        "--root",
        str(root),
        "evidence",
        "--from-log",
        str(log),
        "--profile",
        "r33",
        "--force",
        "--json",
        env={"HF_TOKEN": secret},
    )
    assert res.returncode == 0, res.stderr
    run = root / json.loads(res.stdout)["path"]
    assert secret in log.read_text() and "***" in (run / "startup.log").read_text()
    for path in run.iterdir():
        assert secret not in path.read_text(), path.name
