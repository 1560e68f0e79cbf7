"""Where the project lives: the nearest parent of the working directory that holds `profiles/`,
unless `--root DIR` or COMPOSEGEN_ROOT says otherwise."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from composegen.errors import BadInput

PACKAGE_DIR = Path(__file__).resolve().parent


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


def atomic_write(path: Path, data: str | bytes) -> None:
    """Write via a temp file in the same directory and rename, so readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    mode = "wb" if isinstance(data, bytes) else "w"
    with open(tmp, mode, **({} if isinstance(data, bytes) else {"encoding": "utf-8", "newline": "\n"})) as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
