"""Inspect a shared-memory directory (/dev/shm): every entry, who holds it, which container.

`scan(path)` -> composegen.shm.reports.ShmScan (`composegen schema --report shm`);
`container_shm(name_or_id, inspect=...)` -> the same, with the container's facts. The pass itself:
listing.py; the compact JSON fast route: fastjson.py; text and `up`'s warnings: text.py; the
leftover names: patterns.py; reclaim: reclaim.py; docs/shm.md. Container labels come from an
injected callable (container id -> labels | None): no engine here. CLI exit codes: 0 ok; 1 leftovers
present with --fail-on-leftover (CheckFailed); 2 path missing / not a directory / not a tmpfs
without --force (BadInput); 3 engine problems (EngineError)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from composegen.errors import BadInput
from composegen.shm import procscan
from composegen.shm.directory import TMPFS_MAGIC as TMPFS_MAGIC
from composegen.shm.directory import filesystem_type as filesystem_type
from composegen.shm.directory import open_dir as open_dir
from composegen.shm.directory import require_tmpfs as require_tmpfs
from composegen.shm.listing import Listing, entry_doc, list_fd
from composegen.shm.listing import kind_of as kind_of
from composegen.shm.patterns import CLASSES as CLASSES
from composegen.shm.patterns import LEFTOVER_PATTERNS as LEFTOVER_PATTERNS
from composegen.shm.patterns import match_pattern as match_pattern
from composegen.shm.patterns import patterns_table_markdown as patterns_table_markdown
from composegen.shm.reports import ContainerFacts, ShmScan

# re-exported: stack/ and the CLI use scan.*
from composegen.shm.text import check_budget as check_budget
from composegen.shm.text import format_after_down as format_after_down
from composegen.shm.text import format_text as format_text
from composegen.shm.text import human_bytes as human_bytes
from composegen.shm.text import printable as printable
from composegen.shm.text import unreadable_lines as unreadable_lines


def report_of(listing: Listing) -> ShmScan:
    """The listing's typed documents as the model (validated: the shape is the schema's)."""
    entries = [
        entry_doc(row, listing.held.get(position, [])) for position, row in enumerate(listing.rows)
    ]
    return ShmScan.model_validate({**listing.head, "entries": entries})


def scan_fd(
    dfd: int, path: str, container_labels: procscan.LabelResolver | None, proc_root: str
) -> ShmScan:
    return report_of(list_fd(dfd, path, container_labels, proc_root))


def scan(
    path: str = "/dev/shm",
    *,
    container_labels: procscan.LabelResolver | None = None,
    proc_root: str = "/proc",
    tmpfs_only: bool = False,
) -> ShmScan:
    """Every entry directly in `path`, classified, with the processes (and containers) holding it.

    container_labels: callable container_id -> labels dict | None (default: none looked up).
    tmpfs_only: refuse (BadInput) a directory that is not on a tmpfs."""
    dfd = open_dir(path, follow=True)
    try:
        if tmpfs_only:
            require_tmpfs(dfd, path)
        return scan_fd(dfd, path, container_labels, proc_root)
    finally:
        os.close(dfd)


def container_shm(
    name_or_id: str,
    *,
    inspect: Callable[[str], Mapping[str, Any]],
    container_labels: procscan.LabelResolver | None = None,
) -> ShmScan:
    """Scan a running container's own /dev/shm from the host through /proc/<its pid>/root.

    inspect: name or id -> {id, name, pid, running, status, ipc_mode, shm_size_bytes} (the engine's
    composegen.stack.engine.shm_facts, injected); it raises BadInput for an unknown container."""
    facts = inspect(name_or_id)
    if not facts.get("running") or not facts.get("pid"):
        raise BadInput(
            f"{name_or_id}: container: not running (status {facts.get('status') or '?'})"
        )
    report = scan(f"/proc/{facts['pid']}/root/dev/shm", container_labels=container_labels)
    report.container = ContainerFacts.model_validate(
        {key: facts.get(key) for key in ("id", "ipc_mode", "name", "pid", "shm_size_bytes")}
    )
    return report
