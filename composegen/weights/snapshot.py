"""What a snapshot must hold (docs/weights.md's required files), and what it holds.

`LISTING_PY` is one stdlib script that lists a directory (sizes through the HF cache's symlinks, the
shard index's text, partial downloads): composegen runs it in-process for this host and in a
throw-away container for a remote node's host, so both are judged by the same code from the same
facts."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, TypedDict

from composegen.safewrite import component_problem

INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "tokenizer.model",
    "special_tokens_map.json",
    "vocab.json",
    "merges.txt",
    "vocab.txt",
)
TOKENIZER_CORE = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt")
OPTIONAL_LISTED = ("generation_config.json",)  # required when the Hub lists them

LISTING_PY = r"""
import json, os, sys
def listing(snapshot, blobs, index_name):
    out = {"exists": os.path.isdir(snapshot), "files": {}, "index": None, "partial": {}}
    if out["exists"]:
        for root, dirs, files in os.walk(snapshot):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            for f in files:
                path = os.path.join(root, f)
                rel = os.path.relpath(path, snapshot)
                try:
                    out["files"][rel] = os.stat(path).st_size
                except OSError:
                    out["files"][rel] = None  # a dangling link into blobs/
        index = os.path.join(snapshot, index_name)
        if os.path.isfile(index):
            with open(index, encoding="utf-8", errors="replace") as fh:
                out["index"] = fh.read(64 * 1024 * 1024)
    if blobs and os.path.isdir(blobs):
        for e in os.scandir(blobs):
            if e.name.endswith(".incomplete"):
                out["partial"][e.name] = e.stat().st_size
    return out
if __name__ == "__main__":
    print(json.dumps(listing(*json.loads(sys.argv[1]))))
"""


class Listing(TypedDict):
    """LISTING_PY's answer: the snapshot's files (size, None for a dangling link), its index's text,
    and the partial downloads in blobs/ (size)."""

    exists: bool
    files: dict[str, int | None]
    index: str | None
    partial: dict[str, int]


def list_local(snapshot: str, blobs: str | None) -> Listing:
    """LISTING_PY run here, on this host."""
    scope: dict[str, Any] = {"__name__": "composegen_listing"}
    exec(compile(LISTING_PY, "<listing>", "exec"), scope)
    return scope["listing"](snapshot, blobs, INDEX)


def checked_listing(found: object) -> Listing:
    """LISTING_PY's answer read back from another host (a container's output): every field checked,
    else ValueError naming the first that is not what the script writes."""

    def sizes(value: object, name: str, nullable: bool) -> dict[str, int | None]:
        out: dict[str, int | None] = {}
        for k, v in value.items() if isinstance(value, dict) else [(None, None)]:
            if not isinstance(k, str) or not (
                (v is None and nullable) or (isinstance(v, int) and not isinstance(v, bool))
            ):
                raise ValueError(f"`{name}` is not a map of file names to sizes")
            out[k] = v
        return out

    if not isinstance(found, dict):
        raise ValueError("not a JSON object")
    if not isinstance(found.get("exists"), bool):
        raise ValueError("`exists` is not true or false")
    index = found.get("index")
    if index is not None and not isinstance(index, str):
        raise ValueError("`index` is not text")
    files = sizes(found.get("files"), "files", nullable=True)
    partial = {k: v or 0 for k, v in sizes(found.get("partial"), "partial", nullable=False).items()}
    return Listing(exists=found["exists"], files=files, index=index, partial=partial)


def listing_args(snapshot: str, blobs: str | None) -> str:
    return json.dumps([snapshot, blobs, INDEX])


@dataclass
class HubFile:
    size: int | None
    sha256: str | None  # LFS files
    git_sha1: str | None  # the git blob id (every file)


@dataclass
class Judged:
    files: list[dict] = field(default_factory=list)  # {name, bytes, present, expected_bytes}
    missing: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.missing and not self.problems

    @property
    def total_bytes(self) -> int:
        return sum(f["bytes"] or 0 for f in self.files if f["present"])


def index_shards(text: str | None) -> list[str] | None:
    """Shard names of a safetensors index (None when there is no readable index)."""
    if not text:
        return None
    try:
        weight_map = json.loads(text).get("weight_map")
    except (ValueError, AttributeError):
        return None
    if not isinstance(weight_map, dict):
        return None
    return sorted({str(v) for v in weight_map.values()})


def required(listing: dict, hub: dict[str, HubFile] | None) -> tuple[list[str], list[str]]:
    """The files the snapshot must hold, and problems found on the way (an unreadable index)."""
    present = {n for n, size in listing.get("files", {}).items() if size is not None}
    names, problems = ["config.json"], []
    if hub is not None:
        names += [n for n in (*TOKENIZER_FILES, *OPTIONAL_LISTED) if n in hub]
    else:
        names += ["tokenizer_config.json"] + [
            n for n in TOKENIZER_FILES if n in present and n != "tokenizer_config.json"
        ]
        if not any(n in present for n in TOKENIZER_CORE):
            names.append("tokenizer.json")
    has_index = INDEX in present or (hub is not None and INDEX in hub)
    if has_index:
        names.append(INDEX)
        shards = index_shards(listing.get("index"))
        if shards is not None:
            # names from a downloaded file become paths: one plain component each
            for shard in shards:
                problem = component_problem(shard)
                if problem is None:
                    names.append(shard)
                else:
                    problems.append(
                        f"{INDEX} names the shard {shard[:120]!r}, which {problem}; refused"
                    )
        elif INDEX in present:
            problems.append(f"{INDEX} is not a safetensors index (no weight_map)")
    elif SINGLE in present or (hub is not None and SINGLE in hub):
        names.append(SINGLE)
    else:
        names.append(INDEX)  # nothing says which: name what the pinned checkpoints ship
    return list(dict.fromkeys(names)), problems


def judge(listing: Listing, hub: dict[str, HubFile] | None = None) -> Judged:
    # required's source also runs in a pod (k8s/weights_init.py)
    names, problems = required(dict(listing), hub)
    files = listing.get("files", {})
    out = Judged(problems=problems)
    for name in names:
        size = files.get(name)
        expected = hub[name].size if hub is not None and name in hub else None
        present = size is not None
        out.files.append(
            {"name": name, "bytes": size, "present": present, "expected_bytes": expected}
        )
        if size is None:
            out.missing.append(name)
        elif expected is not None and size != expected:
            out.problems.append(f"{name}: {size} bytes, the Hub says {expected}")
    return out
