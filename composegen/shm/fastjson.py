"""`composegen shm --json`, piped: the scan written as compact sorted JSON without a model or a dict
per entry. Its shape is reports.ShmScan's (tests hold the two byte for byte equal); importing
pydantic alone would cost more than scanning 10,000 entries, so this module never does
(docs/benchmarks.md)."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterator
from json.encoder import encode_basestring_ascii

from composegen.shm import procscan
from composegen.shm.directory import open_dir, require_tmpfs
from composegen.shm.listing import Row, ScanHead, entry_doc, list_fd
from composegen.shm.patterns import LEFTOVER_PATTERNS

# An entry nothing holds, filled positionally from its row: the same bytes as the compact sorted
# json.dumps of its document (tests compare the two) at a third of the cost.
_UNHELD_ENTRY_JSON = (
    '{"age_seconds":%r,"allocated_bytes":%d,"class":"%s","dev":%d,"holders":[],"inode":%d,'
    '"kind":"%s","name":%s,"nlink":%d,"pattern":%s,"size_bytes":%d,"uid":%d,"user":%s}'
)
_compact = functools.partial(json.dumps, sort_keys=True, separators=(",", ":"))
_PATTERN_JSON: dict[str | None, str] = {
    None: "null",
    **{p["id"]: f'"{p["id"]}"' for p in LEFTOVER_PATTERNS},
}


def _unheld_entries_json(rows: list[Row]) -> list[str]:
    users: dict[str | None, str] = {}
    texts = []
    for age, allocated, cls, dev, inode, kind, name, nlink, pattern, size, uid, user in rows:
        if user not in users:
            users[user] = _compact(user)
        head = (age, allocated, cls, dev, inode, kind, encode_basestring_ascii(name), nlink)
        texts.append(_UNHELD_ENTRY_JSON % (*head, _PATTERN_JSON[pattern], size, uid, users[user]))
    return texts


def scan_json(
    path: str = "/dev/shm",
    *,
    container_labels: procscan.LabelResolver | None = None,
    proc_root: str = "/proc",
    tmpfs_only: bool = False,
) -> tuple[ScanHead, Iterator[str]]:
    """scan.scan(path) as compact sorted JSON: (the report without its entries, its whole JSON in
    pieces). Entries are rendered while the /proc pass runs; those found held are rendered again."""
    dfd = open_dir(path, follow=True)
    try:
        if tmpfs_only:
            require_tmpfs(dfd, path)
        head, rows, held, texts = list_fd(
            dfd, path, container_labels, proc_root, _unheld_entries_json
        )
    finally:
        os.close(dfd)
    for position, holders in held.items():
        texts[position] = _compact(entry_doc(rows[position], holders))
    return head, _json_pieces(head, texts)


def _json_pieces(head: ScanHead, entry_texts: list[str], batch: int = 1000) -> Iterator[str]:
    yield "{"
    for number, key in enumerate(sorted([*head, "entries"])):
        yield f'{"," if number else ""}"{key}":'
        if key != "entries":
            yield _compact(head[key])  # type: ignore[literal-required]  # every key of the head, in order
            continue
        yield "["
        for start in range(0, len(entry_texts), batch):
            yield ("," if start else "") + ",".join(entry_texts[start : start + batch])
        yield "]"
    yield "}"
