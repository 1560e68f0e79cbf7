"""Where the project lives: the nearest parent of the working directory that holds `profiles/`,
unless `--root DIR` or COMPOSEGEN_ROOT says otherwise."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from composegen.errors import BadInput

PACKAGE_DIR = Path(__file__).resolve().parent
# A profile name is a file stem, an out/ directory and part of a compose project name (`composegen-NAME`):
# compose's project grammar, lower case and no '.', so `BIG`/`big` or `a.b`/`a-b` can never share a stack.
PROFILE_NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")


def compose_project(profile: str, node: str | None = None) -> str:
    """The compose project of a profile's stack (or of one node's, for a multi-node profile)."""
    base = f"composegen-{profile}" if node is None else f"composegen-{profile}-{node}"
    return base.lower().replace(".", "-")


def profile_name_problem(name: str) -> str | None:
    """Why `name` cannot name a profile (None when it can)."""
    if PROFILE_NAME_RE.fullmatch(name):
        return None
    return (
        f"{name!r} is not a profile name (lower-case letters, digits, '-' and '_', at most 63, first a letter or digit)"
    )


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
        """base/parts, refused (BadInput) when it would leave base or pass through a symlink: files composegen
        writes or removes under out/, runs/ or .composegen/ stay in the project, whatever links someone planted."""
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
                raise BadInput(
                    f"{current.relative_to(self.root)}: is a symbolic link; composegen never writes through links"
                )
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
        hint="run inside a composegen project, or pass --root DIR / set COMPOSEGEN_ROOT",
    )


def templates_dir() -> Path:
    """Templates ship inside the wheel (composegen/templates) and sit at the repo top in a checkout."""
    for candidate in (PACKAGE_DIR / "templates", PACKAGE_DIR.parent / "templates"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("composegen templates are missing from this installation")
