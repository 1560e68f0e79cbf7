"""Opening the directory to scan or reclaim, and checking it is a tmpfs (docs/shm.md)."""

from __future__ import annotations

import os

from composegen.errors import BadInput
from composegen.shm.text import printable


def open_dir(path: str, *, follow: bool) -> int:
    if not path:
        raise BadInput("path: empty; name a directory")
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        return os.open(path, flags)
    except FileNotFoundError:
        raise BadInput(f"{path}: path: does not exist") from None
    except NotADirectoryError:
        # O_NOFOLLOW|O_DIRECTORY on a link fails with ENOTDIR
        if not follow and os.path.islink(path):
            raise BadInput(
                f"{path}: path: is a symbolic link; pass the directory it points to"
            ) from None
        raise BadInput(f"{path}: path: not a directory") from None
    except PermissionError:
        raise BadInput(f"{path}: path: permission denied") from None
    except OSError as exc:
        raise BadInput(f"{path}: path: {exc.strerror}") from None


TMPFS_MAGIC = 0x01021994  # linux/magic.h


def filesystem_type(dfd: int) -> int | None:
    """f_type of fstatfs(2) (os.statvfs does not carry it); None where it cannot be read."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(256)  # struct statfs is 120 bytes on 64-bit Linux
    if not hasattr(libc, "fstatfs") or libc.fstatfs(dfd, buf) != 0:
        return None
    # f_type comes first: a long on every 64-bit ABI except s390x, where it is an unsigned int.
    field = ctypes.c_uint if os.uname().machine == "s390x" else ctypes.c_long
    return field.from_buffer(buf).value


def mount_type(dev: int) -> str | None:
    """The filesystem type /proc/self/mountinfo gives a device; None when this mount namespace does
    not show it (a path through /proc/PID/root). Cheaper than loading ctypes for fstatfs."""
    token = b"%d:%d" % (os.major(dev), os.minor(dev))
    try:
        fd = os.open("/proc/self/mountinfo", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        data = b"".join(iter(lambda: os.read(fd, 1 << 16), b""))
    finally:
        os.close(fd)
    for line in data.split(b"\n"):
        # id parent major:minor root mountpoint options [optional...] - type source
        fields = line.split(b" ")
        if len(fields) > 2 and fields[2] == token and b"-" in fields[6:]:
            at = fields.index(b"-", 6) + 1
            return fields[at].decode("utf-8", "replace") if at < len(fields) else None
    return None


def require_tmpfs(dfd: int, path: str) -> None:
    """Leftover names mean something only on a shared-memory filesystem: elsewhere (a home dir,
    /tmp on disk) the same names are someone's data. --force accepts another filesystem."""
    if mount_type(os.fstat(dfd).st_dev) == "tmpfs":
        return
    kind = filesystem_type(dfd)  # authoritative, in any mount namespace
    if kind != TMPFS_MAGIC:
        what = "of unknown type" if kind is None else f"type 0x{kind:x}"
        raise BadInput(
            f"{printable(path)}: path: not a tmpfs (filesystem {what}); pass --force to inspect or reclaim it anyway"
        )
