"""composegen's runtime state under .composegen/ (emulator overrides, per-profile locks): created private
(directories 0700, files 0600), never through a symbolic link, and written atomically.

`profile_lock(project, name)` serializes runs of one profile across processes: an flock on
.composegen/locks/NAME.lock, held for the whole `up` (so two `up` of one profile never interleave).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from composegen import safewrite
from composegen.errors import BadInput
from composegen.project import Project

STATE_DIR = ".composegen"


def private_dir(project: Project, *parts: str) -> Path:
    """.composegen/PARTS..., each level created 0700; a symbolic link anywhere on the way is refused."""
    path = project.root
    for piece in (STATE_DIR, *parts):
        path = path / piece
        if path.is_symlink():
            raise BadInput(f"{project.rel(path)}: is a symbolic link; composegen never writes through links")
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            if not path.is_dir():
                raise BadInput(f"{project.rel(path)}: exists and is not a directory") from None
    return path


def private_write(path: Path, text: str) -> None:
    """Write a 0600 file atomically, never through a link or over a special file (safewrite)."""
    safewrite.write(path, text, private=True)


@contextlib.contextmanager
def profile_lock(project: Project, name: str, on_wait: Callable[[str], None] = lambda text: None) -> Iterator[None]:
    """Hold the profile's lock; when another process holds it, say so through `on_wait` and wait."""
    path = private_dir(project, "locks") / f"{name}.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "?"
            on_wait(f"waiting for another composegen run of {name} (pid {holder}) to finish")
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
