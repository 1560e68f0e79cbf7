"""Campaign files: written atomically (temp file, fsync, rename), private (0600 in 0700 directories) and
never through a symbolic link, so Ctrl-C, a crash or a reboot leaves either the old file or the new one."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from datetime import UTC, datetime
from pathlib import Path

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
    """Replace PATH in one step; an existing link or special file at PATH is refused, never followed."""
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise BadInput(f"{path}: is a link or not a regular file; not replaced")
    blob = data.encode("utf-8") if isinstance(data, str) else data
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(blob)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        dfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dfd)  # the rename itself survives a reboot
        finally:
            os.close(dfd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_json(path: Path, value) -> None:
    write_atomic(path, json.dumps(value, indent=2, sort_keys=True) + "\n")


def append_log(path: Path, message: str) -> None:
    """One `UTC-time message` line appended to the campaign log."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | NOFOLLOW, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as fh:
        fh.write(f"{now_iso()} {message}\n")
