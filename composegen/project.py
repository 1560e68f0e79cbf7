"""Where the project lives: the nearest parent of the working directory that holds `profiles/`,
unless `--root DIR` or COMPOSEGEN_ROOT says otherwise."""

from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from composegen.errors import BadInput

PACKAGE_DIR = Path(__file__).resolve().parent
# A profile name is a file stem, an out/ directory and part of a compose project name
# (`composegen-NAME`): compose's project grammar, lower case and no '.', so `BIG`/`big` or
# `a.b`/`a-b` can never share a stack.
PROFILE_NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")


def compose_project(profile: str, node: str | None = None, scope: str = "composegen") -> str:
    """The compose project of a profile's stack (of one node's: multi-node), SCOPE: composegen.yaml's"""
    base = f"{scope}-{profile}" if node is None else f"{scope}-{profile}-{node}"
    return base.lower().replace(".", "-")


def profile_name_problem(name: str) -> str | None:
    """Why `name` cannot name a profile (None when it can)."""
    if PROFILE_NAME_RE.fullmatch(name):
        return None
    rule = "lower-case letters, digits, '-' and '_', at most 63, first a letter or digit"
    return f"{name!r} is not a profile name ({rule})"


@dataclass(frozen=True)
class Project:
    root: Path

    @property
    def profiles_dir(self) -> Path:
        return self.root / "profiles"

    @property
    def out_dir(self) -> Path:
        return self.root / "out"

    @property
    def runs_dir(self) -> Path:
        return self.root / "runs"

    def profile_path(self, name: str) -> Path:
        return self.profiles_dir / f"{name}.yaml"

    def out_path(self, name: str) -> Path:
        return self.out_dir / name / "compose.yaml"

    def rel(self, path: Path) -> str:
        """A path as users see it in messages: relative to the root when inside it."""
        try:
            return str(path.resolve().relative_to(self.root))
        except ValueError:
            return str(path)

    def inside(self, base: Path, *parts: str) -> Path:
        """base/parts, BadInput if it would leave base or pass a symlink: what composegen writes or
        removes under out/, runs/ or .composegen/ stays in the project, whatever links exist."""
        path = base
        for part in parts:
            for piece in Path(part).parts:
                if piece in ("", ".", "..") or "/" in piece or "\0" in piece:
                    where = base.relative_to(self.root)
                    raise BadInput(f"{where}/{part}: not a plain relative path inside {where}/")
                path = path / piece
        current = self.root
        for piece in path.relative_to(self.root).parts:
            current = current / piece
            if current.is_symlink():
                msg = f"{current.relative_to(self.root)}: is a symbolic link; composegen never writes through links"
                raise BadInput(msg)
        return path

    def profile_names(self) -> list[str]:
        if not self.profiles_dir.is_dir():
            return []
        return sorted(p.stem for p in self.profiles_dir.glob("*.yaml"))


def find_project(root: str | Path | None = None, cwd: Path | None = None) -> Project:
    explicit = root or os.environ.get("COMPOSEGEN_ROOT")
    if explicit:
        path = Path(explicit).expanduser().resolve()
        if not (path / "profiles").is_dir():
            raise BadInput(f"{path}: no profiles/ directory here (from --root / COMPOSEGEN_ROOT)")
        return Project(path)
    start = (cwd or Path.cwd()).resolve()
    for candidate in (start, *start.parents):
        if (candidate / "profiles").is_dir():
            return Project(candidate)
    raise BadInput(
        f"{start}: no profiles/ directory here or in any parent",
        hint="`composegen init` makes one here; or run inside a project, or pass --root DIR",
    )


def templates_dir() -> Path:
    """Templates ship in the wheel (composegen/templates), at the repo top in a checkout."""
    for candidate in (PACKAGE_DIR / "templates", PACKAGE_DIR.parent / "templates"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("composegen templates are missing from this installation")


def docs_dir() -> Path:
    """The documentation pages `composegen docs` prints: inside the wheel (composegen/docs), at the
    repo top in a checkout."""
    for candidate in (PACKAGE_DIR / "docs", PACKAGE_DIR.parent / "docs"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("composegen's documentation is missing from this installation")


def read_input(
    path: Path,
    display: str,
    cap: int,
    noun: str,
    rule: str,
    *,
    stream_ok: bool = False,
    follow: bool = False,
) -> bytes:
    """The bytes of an input file, never more than `cap`: a regular file (or, with `stream_ok`, a
    pipe such as `<(ssh host cat log)`). The final component is not followed unless `follow` (a
    profile linked to /proc/kmsg is refused), regular files are opened without blocking, and fstat
    on the open file decides (a device such as /dev/zero is refused), so what is read is what was
    checked. `rule` says, in a refusal, what is allowed."""
    flags = (
        os.O_RDONLY
        | os.O_CLOEXEC
        | (0 if follow else os.O_NOFOLLOW)
        | (0 if stream_ok else os.O_NONBLOCK)
    )
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise BadInput(f"{display}: no such file") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise BadInput(f"{display}: a symbolic link; {rule}") from None
        raise BadInput(f"{display}: cannot read ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if not (stat.S_ISREG(info.st_mode) or (stream_ok and stat.S_ISFIFO(info.st_mode))):
            raise BadInput(f"{display}: not a regular file; {rule}")
        chunks, size = [], 0
        while size <= cap and (piece := os.read(fd, min(1 << 20, cap + 1 - size))):
            chunks.append(piece)
            size += len(piece)
        if size > cap:
            raise BadInput(f"{display}: larger than {cap >> 20} MiB; not {noun}")
        return b"".join(chunks)
    except BlockingIOError:
        raise BadInput(f"{display}: cannot be read without waiting; {rule}") from None
    except OSError as exc:
        raise BadInput(f"{display}: cannot read ({exc.strerror})") from None
    finally:
        os.close(fd)
