"""One flag-catalog reader (vllm/catalog.py) for profiles, the startup mismatch check and the compose diff;
the diff reads each side's argv with that side's vLLM version; durations and sizes in one units module."""

from __future__ import annotations

import json
import shutil
from decimal import Decimal

import pytest

from composegen import units
from composegen.diff.normalise import normalise_service
from composegen.vllm import catalog


@pytest.fixture
def renamed_flag_version(tmp_path, monkeypatch):
    """A catalog for a made-up vLLM 9.9.9 where --max-num-batched-tokens is spelled --max-batch-tokens."""
    for source in catalog.DATA_DIR.glob("vllm-*-serve-flags.json"):
        shutil.copy(source, tmp_path / source.name)
    raw = json.loads(
        (catalog.DATA_DIR / "vllm-0.33.0-serve-flags.json").read_text(encoding="utf-8")
    )
    for entry in raw["flags"]:
        if entry["options"][0] == "--max-num-batched-tokens":
            entry["options"] = ["--max-batch-tokens"]
    raw["vllm_version"] = "9.9.9"
    (tmp_path / "vllm-9.9.9-serve-flags.json").write_text(json.dumps(raw), encoding="utf-8")
    monkeypatch.setattr(catalog, "DATA_DIR", tmp_path)
    return "9.9.9"


def _service(version: str | None, *flags: str) -> dict:
    labels = {"io.composegen.vllm-version": version} if version else {}
    return {
        "image": "vllm/vllm-openai",
        "entrypoint": ["vllm", "serve"],
        "command": ["org/m", *flags],
        "labels": labels,
    }


def test_the_diff_reads_each_side_with_its_own_catalog(renamed_flag_version):
    new = normalise_service(_service(renamed_flag_version, "--max-batch-tokens", "4096"))
    old = normalise_service(_service("0.33.0", "--max-num-batched-tokens", "4096"))
    assert new[("command", "--max-batch-tokens")] == 4096  # typed: 9.9.9's catalog knows the flag
    assert old[("command", "--max-num-batched-tokens")] == 4096
    unknown = normalise_service(_service("0.33.0", "--max-batch-tokens", "4096"))
    # 0.33.0 does not know it: left as text
    assert unknown[("command", "--max-batch-tokens")] == "4096"
    unlabelled = normalise_service(_service(None, "--max-num-batched-tokens", "4096"))
    # no label: the default catalog
    assert unlabelled[("command", "--max-num-batched-tokens")] == 4096
    no_catalog = normalise_service(_service("0.1.0", "--max-num-batched-tokens", "4096"))
    # unknown version: the default
    assert no_catalog[("command", "--max-num-batched-tokens")] == 4096


def test_mismatches_use_the_catalog_of_the_given_version(renamed_flag_version):
    from composegen.vllm.mismatch import mismatches

    args = {"max_num_batched_tokens": 4096}
    assert mismatches({"max-batch-tokens": 4096}, args, renamed_flag_version) == []
    # 0.33 maps it to another dest
    assert mismatches({"max-batch-tokens": 4096}, args, "0.33.0") != []


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("90s", 90),
        ("1m30s", 90),
        ("1h", 3600),
        ("250ms", Decimal("0.25")),
        ("5us", Decimal("0.000005")),
        ("5µs", Decimal("0.000005")),
        ("5μs", Decimal("0.000005")),
        ("1.5s", Decimal("1.5")),
        ("10ns", Decimal("1e-8")),
    ],
)
def test_durations_have_one_meaning(text, seconds):
    assert units.parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "5", "s", "1m 30s", "-1s", "1d", "5 us"])
def test_what_is_not_a_duration(text):
    assert units.parse_duration(text) is None


def test_sizes_are_written_one_way():
    assert units.format_gib(41.666) == "41.67 GiB" and units.format_gib(None) == "n/a"
    assert [units.format_bytes(n) for n in (512, 4 << 20, 16 << 30)] == [
        "512 B",
        "4.0 MiB",
        "16.0 GiB",
    ]
