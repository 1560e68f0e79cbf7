"""composegen's private state, in one place for every room: the project's .composegen/ (emulator
overrides, locks, the edge's keys and routes) and the campaign directories under runs/campaigns/.

Directories are 0700 and files 0600; nothing is read or written through a symbolic link or over a
special file; writes are atomic (composegen.safewrite), so Ctrl-C, a crash or a reboot leaves the
old file or the new one. Times are written in one format, `stamp()`: UTC to the second,
`2026-12-03T18:16:19Z`.

`seal(project, doc)` signs a record composegen writes (a campaign decision) with the project's own
key, .composegen/keys/records.key (32 random bytes, 0600, made at first use, never in git); `sealed`
checks one. A file typed by hand, or copied from another project, carries no valid seal.

`profile_lock(project, name)` serializes runs of one profile (or one edge operation) across
processes: an flock on .composegen/locks/NAME.lock, held for the whole operation.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import hmac
import json
import os
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar, cast

from composegen import safewrite
from composegen.errors import BadInput
from composegen.project import Project

STATE_DIR = ".composegen"
MAX_STATE_BYTES = 4 << 20
STAMP_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
Doc = TypeVar("Doc", bound=Mapping[str, object])


def private_dir(base: Path, *parts: str) -> Path:
    """BASE/PARTS..., every level made 0700 when missing (BASE with its parents); a symbolic link or
    a non-directory at any level is refused, never followed."""
    path = base
    for index, piece in enumerate(("", *parts)):
        path = path / piece if piece else path
        if path.is_symlink():
            raise BadInput(f"{path}: is a symbolic link; composegen never writes through links")
        try:
            path.mkdir(mode=0o700, parents=index == 0)
        except FileExistsError:
            if not path.is_dir():
                raise BadInput(f"{path}: exists and is not a directory") from None
    return path


def state_dir(project: Project, *parts: str) -> Path:
    """.composegen/PARTS... of the project (private_dir)."""
    return private_dir(project.root, STATE_DIR, *parts)


SEAL_FIELD = "seal"


def _records_key(project: Project) -> bytes:
    path = state_dir(project, "keys") / "records.key"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "wb") as fh:
            fh.write(os.urandom(32))
    if path.is_symlink() or not path.is_file():
        raise BadInput(f"{path}: not a plain file; composegen never reads keys through links")
    key = path.read_bytes()
    if len(key) != 32:
        msg = f"{path}: not a composegen records key (32 bytes); remove it to make a new one"
        raise BadInput(msg)
    return key


def _sealed_bytes(doc: Mapping[str, object]) -> bytes:
    body = {k: v for k, v in doc.items() if k != SEAL_FIELD}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def seal(project: Project, doc: Mapping[str, object]) -> str:
    """hmac-sha256:<hex> of DOC's fields (all but the seal) under the project's records key."""
    return (
        "hmac-sha256:"
        + hmac.new(_records_key(project), _sealed_bytes(doc), hashlib.sha256).hexdigest()
    )


def sealed(project: Project, doc: Mapping[str, object]) -> bool:
    given = doc.get(SEAL_FIELD)
    return isinstance(given, str) and hmac.compare_digest(given, seal(project, doc))


def write(path: Path, data: str | bytes) -> None:
    """Replace PATH in one step, 0600; an existing link or special file at PATH is refused."""
    safewrite.write(path, data, private=True)


def write_json(path: Path, doc: Mapping[str, object]) -> None:
    """A JSON object, keys sorted (the same document always gives the same bytes)."""
    write(path, json.dumps(doc, indent=1, sort_keys=True) + "\n")


def read_json(path: Path, empty: Doc) -> Doc:
    """A state file of ours: a plain file, bounded, a JSON object; BadInput naming it otherwise.
    Typed as the file's shape (EMPTY's type, returned when the file is missing); its reader checks
    each field it uses, so files from older runs, or edited by hand, are reported rather than
    trusted."""
    if path.is_symlink():
        raise BadInput(f"{path}: is a symbolic link; composegen never reads state through links")
    if not path.exists():
        return empty
    if not path.is_file() or path.stat().st_size > MAX_STATE_BYTES:
        raise BadInput(f"{path}: not a plain file, or larger than {MAX_STATE_BYTES >> 20} MiB")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        msg = f"{path}:1: unreadable JSON ({type(exc).__name__}); fix or remove it"
        raise BadInput(msg) from None
    if not isinstance(doc, dict):
        raise BadInput(f"{path}:1: must be a JSON object")
    return cast(Doc, doc)


def append_line(path: Path, message: str) -> None:
    """One `STAMP message` line appended to a private log (created 0600, never through a link)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as fh:
        fh.write(f"{stamp()} {message}\n")


def now() -> datetime:
    """Now, in UTC, to the second (what `stamp` writes)."""
    return datetime.now(UTC).replace(microsecond=0)


def stamp(moment: datetime | None = None) -> str:
    """MOMENT (default: now) as composegen writes every time: UTC, to the second, `Z`."""
    return (moment or now()).astimezone(UTC).strftime(STAMP_FORMAT)


def parse_stamp(text: object) -> datetime | None:
    """A time read back from a state file: an aware datetime, or None when TEXT is not a time with a
    zone (a file edited by hand is reported by its reader, never an internal error)."""
    if not isinstance(text, str) or len(text) > 64:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


@contextlib.contextmanager
def profile_lock(
    project: Project, name: str, on_wait: Callable[[str], None] = lambda text: None
) -> Iterator[None]:
    """Hold NAME's lock; when another process holds it, say so through `on_wait` and wait."""
    path = state_dir(project, "locks") / f"{safewrite.component(name, 'lock name')}.lock"
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
