"""The model cache's directories, opened without following links: a download writes only inside
them.

`Dirs(loc)` opens the cache root (or model.path's directory) as the profile names it — that path is
the user's, links in it are theirs — and every level below it (models--ORG--NAME, blobs, snapshots,
REV) with O_NOFOLLOW, creating missing ones. A symbolic link planted at any of those levels, or in
place of a blob, a partial download or a snapshot entry that is not a link, is refused (BadInput,
exit 2)."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from typing import BinaryIO

from composegen.errors import BadInput
from composegen.weights.cache import Location

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


def _planted(loc: Location, what: str) -> BadInput:
    return BadInput(
        f"{loc.host_dir}: {what} in the model cache; composegen never writes through links"
    )


class Dirs:
    def __init__(self, loc: Location):
        self.loc = loc
        self._fds: dict[tuple[str, ...], int] = {}

    def __enter__(self) -> Dirs:
        os.makedirs(self.loc.host_dir, exist_ok=True)
        self._fds[()] = os.open(self.loc.host_dir, _DIR)
        return self

    def __exit__(self, *exc: object) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()

    def _open(self, *parts: str) -> int:
        if parts in self._fds:
            return self._fds[parts]
        parent = self._open(*parts[:-1])
        with contextlib.suppress(FileExistsError):  # mkdirat never follows a link that is there
            os.mkdir(parts[-1], 0o755, dir_fd=parent)
        try:
            fd = os.open(parts[-1], _DIR | os.O_NOFOLLOW, dir_fd=parent)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise _planted(
                    self.loc, f"{'/'.join(parts)} is a symbolic link or not a directory"
                ) from None
            raise
        self._fds[parts] = fd
        return fd

    def _repo(self) -> tuple[str, ...]:
        return ("models--" + self.loc.model_id.replace("/", "--"),)

    def blob_dir(self) -> int:
        """Where finished files and partials go: blobs/ (hub cache) or the directory itself."""
        return self._open(*self._repo(), "blobs") if self.loc.kind == "hub" else self._open()

    def snapshot_dir(self) -> int:
        return self._open(*self._repo(), "snapshots", self.loc.revision)


def _lstat(dfd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def is_file(dfd: int, name: str, loc: Location) -> bool:
    """Whether a finished regular file is there; a link or special file in its place is refused."""
    st = _lstat(dfd, name)
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise _planted(loc, f"{name} is not a regular file (a link or special file was planted)")
    return st is not None


def remove(dfd: int, name: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name, dir_fd=dfd)  # unlinkat removes a link itself, never what it points to


@contextlib.contextmanager
def append(dfd: int, name: str, loc: Location) -> Iterator[BinaryIO]:
    """The partial download, opened to append (made 0644); never through a link, never a FIFO."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, 0o644, dir_fd=dfd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO):
            raise _planted(loc, f"{name} is a symbolic link or special file") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise _planted(loc, f"{name} is not a regular file")
    os.set_blocking(fd, True)
    with os.fdopen(fd, "ab") as fh:
        fh.seek(0, os.SEEK_END)
        yield fh
        fh.flush()
        os.fsync(fh.fileno())


def settle(dfd: int, partial: str, final: str, loc: Location) -> None:
    """The finished partial takes the final name (only over a regular file or nothing)."""
    is_file(dfd, final, loc)
    os.rename(partial, final, src_dir_fd=dfd, dst_dir_fd=dfd)


def link(dfd: int, name: str, target: str, loc: Location) -> None:
    """snapshots/REV/NAME -> target (relative, like huggingface_hub's own links); an old link or
    file of that name is replaced, a directory there is refused."""
    st = _lstat(dfd, name)
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise _planted(loc, f"snapshots/{loc.revision}/{name} is a directory")
        os.unlink(name, dir_fd=dfd)
    os.symlink(target, name, dir_fd=dfd)
