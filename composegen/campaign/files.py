"""Campaign files: written atomically (temp file, fsync, rename), private (0600 in 0700 directories) and
never through a symbolic link, so Ctrl-C, a crash or a reboot leaves either the old file or the new one."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

from composegen import safewrite
from composegen.errors import BadInput

NOFOLLOW = os.O_NOFOLLOW


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def private_dir(path: Path) -> Path:
    """PATH as a 0700 directory (parents too); a link or a non-directory there is refused."""
    if path.is_symlink():
        raise BadInput(f"{path}: is a symbolic link; composegen never writes through links")
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not path.is_dir():
        raise BadInput(f"{path}: exists and is not a directory")
    return path


def write_atomic(path: Path, data: str | bytes) -> None:
    """Replace PATH in one step, 0600; an existing link or special file at PATH is refused, never followed
    (composegen.safewrite)."""
    safewrite.write(path, data, private=True)


def write_json(path: Path, value: object) -> None:
    write_atomic(path, json.dumps(value, indent=2, sort_keys=True) + "\n")


def append_log(path: Path, message: str) -> None:
    """One `UTC-time message` line appended to the campaign log."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | NOFOLLOW, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as fh:
        fh.write(f"{now_iso()} {message}\n")
