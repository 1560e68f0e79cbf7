"""Profiles as data for tests: a valid base document, edits by key path, and a project holding it."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

BASE: dict[str, Any] = {
    "image": "example/vllm@sha256:" + "a" * 64,
    "model": {"id": "org/model", "revision": "b" * 40, "served_name": "tiny"},
    "service": {"port": {"host": 39999}, "gpus": {"count": 1}, "shm_size": "4gb"},
    "vllm": {"max-model-len": 4096, "max-num-batched-tokens": 2048, "max-num-seqs": 4},
}


def edited(*edits: tuple[tuple[str, ...], Any], base: dict | None = None) -> dict:
    """A copy of the base profile with each (key path, value) set, e.g. (("vllm", "max-num-seqs"), 8)."""
    doc = copy.deepcopy(BASE if base is None else base)
    for keys, value in edits:
        node = doc
        for key in keys[:-1]:
            if not isinstance(node.get(key), dict):
                node[key] = {}
            node = node[key]
        node[keys[-1]] = value
    return doc


def project(
    tmp: Path, doc: dict | str, name: str = "p", extra: dict[str, str] | None = None
) -> Path:
    """tmp as a project with profiles/NAME.yaml holding `doc` (a dict, dumped as YAML, or raw text)."""
    (tmp / "profiles").mkdir(parents=True, exist_ok=True)
    text = doc if isinstance(doc, str) else yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    (tmp / "profiles" / f"{name}.yaml").write_text(text, encoding="utf-8")
    for other, other_text in (extra or {}).items():
        (tmp / "profiles" / f"{other}.yaml").write_text(other_text, encoding="utf-8")
    return tmp


def rendered(root: Path, name: str = "p") -> dict:
    return yaml.safe_load((root / "out" / name / "compose.yaml").read_text(encoding="utf-8"))
