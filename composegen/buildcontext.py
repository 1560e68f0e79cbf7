"""A docker build context as data (stdlib only): its files, the sha256 that tags an image by its
content, and the directory written from it. The edge image (edge/image.py) and the emulator image
(stack/emulatorimage.py) are both tagged this way."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ContextFile:
    path: str  # relative, POSIX separators
    data: bytes
    mode: int


def context_digest(files: list[ContextFile]) -> str:
    """The sha256 of FILES, hex."""
    digest = hashlib.sha256()
    for item in files:  # length-prefixed fields: no two contexts give the same byte stream
        for part in (item.path.encode(), oct(item.mode).encode(), item.data):
            digest.update(len(part).to_bytes(8, "big"))
            digest.update(part)
    return digest.hexdigest()


def write_context(dest: Path, files: list[ContextFile]) -> Path:
    """FILES written under DEST, which must be missing or empty."""
    dest = Path(dest)
    if dest.exists() and any(dest.iterdir()):
        raise FileExistsError(
            f"{dest}: build context directory must be empty (stale files would enter the "
            "image without changing its tag)"
        )
    for item in files:
        target = dest / item.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(item.data)
        target.chmod(item.mode)
    return dest
