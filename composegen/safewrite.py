"""The one way composegen writes a file: never through a link, never over a special file, never
half.

`write(path, data)` and `write_all([(path, data), ...])`:
  - each file is staged as an unpredictable temp name in the target's own directory, created with
    O_CREAT|O_EXCL|O_NOFOLLOW (0600 when `private`), written and fsync-ed;
  - the target must be a regular file or nothing: a symlink, FIFO, device, socket or directory there is
    refused (BadInput, exit 2) before anything is written;
  - the temp file is swapped in with renameat2(RENAME_EXCHANGE) (or RENAME_NOREPLACE for a new name), so
    the entry replaced is the regular file that was checked, not whatever was planted there
    meanwhile;
  - with `base`, every directory between `base` and the target is opened with O_NOFOLLOW (and created
    when missing): a link planted on the way is refused, never followed;
  - `write_all` writes every file or none: all are staged first, then swapped in; a failure puts every
    old file back and removes every new one;
  - a failed write (disk full, EFBIG, read-only filesystem) leaves no temp file and raises WriteFailed
    (exit 3) with one line naming the file and the reason.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from composegen.errors import BadInput, WriteFailed

RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2
_KIND = {
    stat.S_IFLNK: "a symbolic link",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a directory",
}


def component_problem(name: str) -> str | None:
    """Why `name` is not one plain relative path component (None when it is)."""
    if not isinstance(name, str) or name in ("", ".", ".."):
        return "is empty, '.' or '..'"
    if "/" in name or "\0" in name or "\\" in name:
        return "holds '/', '\\' or NUL"
    if len(os.fsencode(name)) > 255:
        return "is longer than 255 bytes"
    return None


def component(name: str, what: str) -> str:
    """`name` when one plain path component; else BadInput naming `what` (where it came from)."""
    problem = component_problem(name)
    if problem is not None:
        raise BadInput(f"{what}: {name!r} {problem}; only a plain file name is accepted")
    return name


_renameat2 = None


def renameat2(dfd: int, src: str, dst: str, flags: int) -> bool:
    """renameat2(2) within one directory; False when the kernel, libc or filesystem lacks it."""
    global _renameat2
    if _renameat2 is None:
        # why: only a write needs renameat2; `render --check` (warm) imports safewrite
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        _renameat2 = (getattr(libc, "renameat2", None), ctypes.get_errno)
    call, get_errno = _renameat2
    if call is None:
        return False
    if call(dfd, os.fsencode(src), dfd, os.fsencode(dst), flags) == 0:
        return True
    code = get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), dst)


def _failed(path: Path, exc: OSError, done: str) -> WriteFailed:
    return WriteFailed(f"{path}: cannot write: {exc.strerror or exc} ({done})")


def _check_target(dfd: int, name: str, path: Path) -> bool:
    """Whether a regular file is there now (False: nothing); BadInput for any other entry."""
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(st.st_mode):
        kind = _KIND.get(stat.S_IFMT(st.st_mode), "not a regular file")
        msg = f"{path}: is {kind}; composegen only replaces regular files, nothing was written"
        raise BadInput(msg)
    return True


def _open_dir(directory: Path, base: Path | None, created: list[tuple[int, str]]) -> int:
    """An fd of `directory`: under `base` walked with O_NOFOLLOW (missing levels made)."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
    if base is None:
        os.makedirs(directory, exist_ok=True)
        return os.open(directory, flags)
    rel = directory.relative_to(base)
    fd = os.open(base, flags)
    current = base
    try:
        for piece in rel.parts:
            current = current / piece
            try:
                new = os.open(piece, flags | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                os.mkdir(piece, 0o755, dir_fd=fd)
                created.append((os.dup(fd), piece))
                new = os.open(piece, flags | os.O_NOFOLLOW, dir_fd=fd)
            except (NotADirectoryError, OSError) as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    msg = f"{current}: is a symbolic link or not a directory; composegen never writes through links"
                    raise BadInput(msg) from None
                raise
            os.close(fd)
            fd = new
        return fd
    except BaseException:
        os.close(fd)
        raise


@dataclass
class _Staged:
    path: Path
    dfd: int
    name: str
    tmp: str = ""
    existed: bool = False
    old: str | None = None  # after commit: the previous file's temp name (removed at the end)
    committed: bool = False


@dataclass
class _Batch:
    base: Path | None
    private: bool
    staged: list[_Staged] = field(default_factory=list)
    created: list[tuple[int, str]] = field(default_factory=list)

    def stage(self, path: Path, data: str | bytes) -> None:
        path = Path(path)
        if component_problem(path.name) is not None:
            raise BadInput(f"{path}: is not a file name (a directory?); nothing was written")
        blob = data if isinstance(data, bytes) else data.encode("utf-8")
        dfd = _open_dir(path.parent, self.base, self.created)
        item = _Staged(path, dfd, path.name)
        self.staged.append(item)
        item.existed = _check_target(dfd, item.name, path)
        mode = 0o600 if self.private else 0o666
        for _ in range(8):
            tmp = f".{item.name[:160]}.{secrets.token_hex(8)}.tmp"
            try:
                fd = os.open(
                    tmp,
                    os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                    mode,
                    dir_fd=dfd,
                )
                break
            except FileExistsError:
                continue
        else:
            raise WriteFailed(f"{path}: cannot create a temp file beside it")
        item.tmp = tmp
        try:
            if self.private:
                os.fchmod(fd, 0o600)
            view = memoryview(blob)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)

    def commit(self, item: _Staged) -> None:
        item.existed = _check_target(item.dfd, item.name, item.path)
        if not item.existed:
            if not renameat2(item.dfd, item.tmp, item.name, RENAME_NOREPLACE):
                os.rename(item.tmp, item.name, src_dir_fd=item.dfd, dst_dir_fd=item.dfd)
            item.tmp, item.committed = "", True
            return
        if renameat2(item.dfd, item.tmp, item.name, RENAME_EXCHANGE):
            item.old, item.tmp, item.committed = item.tmp, "", True
            swapped = os.stat(item.old, dir_fd=item.dfd, follow_symlinks=False)
            # planted between the check and the swap: undo, refuse
            if not stat.S_ISREG(swapped.st_mode):
                renameat2(item.dfd, item.old, item.name, RENAME_EXCHANGE)
                item.tmp, item.old, item.committed = item.old, None, False
                _check_target(item.dfd, item.name, item.path)
            return
        # no exchange here: keep the old file to undo
        old = f".{item.name[:160]}.{secrets.token_hex(8)}.old"
        os.link(item.name, old, src_dir_fd=item.dfd, dst_dir_fd=item.dfd, follow_symlinks=False)
        item.old = old
        os.rename(item.tmp, item.name, src_dir_fd=item.dfd, dst_dir_fd=item.dfd)
        item.tmp, item.committed = "", True

    def rollback(self) -> None:
        for item in reversed(self.staged):
            with contextlib.suppress(OSError):
                if item.committed and item.old:
                    os.rename(item.old, item.name, src_dir_fd=item.dfd, dst_dir_fd=item.dfd)
                    item.old = None
                elif item.committed:
                    os.unlink(item.name, dir_fd=item.dfd)
        for dfd, piece in reversed(self.created):
            with contextlib.suppress(OSError):
                os.rmdir(piece, dir_fd=dfd)

    def cleanup(self) -> None:
        for item in self.staged:
            for name in (item.tmp, item.old):
                if name:
                    with contextlib.suppress(OSError):
                        os.unlink(name, dir_fd=item.dfd)
            with contextlib.suppress(OSError):
                os.fsync(item.dfd)
            os.close(item.dfd)
        for dfd, _ in self.created:
            os.close(dfd)


def write_all(
    items: Iterable[tuple[Path, str | bytes]], *, base: Path | None = None, private: bool = False
) -> None:
    """Write every (path, data) or none (see the module doc). `base`: the trusted directory the
    paths are under; no directory below it may be a link."""
    batch = _Batch(Path(base) if base is not None else None, private)
    current: Path | None = None
    try:
        for path, data in items:
            current = Path(path)
            batch.stage(current, data)
        for item in batch.staged:
            current = item.path
            batch.commit(item)
    except OSError as exc:
        batch.rollback()
        several = len(batch.staged) > 1
        raise _failed(
            current or Path("?"), exc, "no file was changed" if several else "nothing written"
        ) from None
    except BaseException:
        batch.rollback()
        raise
    finally:
        batch.cleanup()


def write(
    path: Path, data: str | bytes, *, base: Path | None = None, private: bool = False
) -> None:
    """Write one file (see the module doc)."""
    write_all([(Path(path), data)], base=base, private=private)
