"""`render --check` answered from a fingerprint: when the real check proved out/ fresh, it records a hash of
everything the answer depends on; a later plain `render --check` whose inputs hash the same prints the
same line without importing the renderer (cli/fastpath.py). Any difference — a profile, a template, a
file under out/, composegen's own code, an installed library, a COMPOSEGEN_* variable — misses, and
the real check runs. Nothing is rendered here, so there is no second renderer to drift from the first.

The record lives in the user's cache directory, not in the project: a repository could commit a record
that says "fresh" for a stale out/, and CI must never believe it.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
from pathlib import Path

from composegen import __version__
from composegen.project import PACKAGE_DIR, atomic_write, templates_dir

RECORD_VERSION = 1
DISABLE_ENV = "COMPOSEGEN_NO_CACHE"
DIR_ENV = "COMPOSEGEN_CACHE_DIR"  # where records go (default: $XDG_CACHE_HOME/composegen); tests set it
_UNHASHED_ENV = {DISABLE_ENV, DIR_ENV}
_SKIP_DIRS = {"__pycache__"}


class _Unusual(Exception):
    """A link, a special file or an unreadable entry among the inputs: the real check decides."""


def cache_dir() -> Path:
    if os.environ.get(DIR_ENV):
        return Path(os.environ[DIR_ENV]) / "render-check"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "composegen" / "render-check"


def _record_path(root: Path) -> Path:
    return cache_dir() / (hashlib.sha256(os.fsencode(root)).hexdigest()[:32] + ".json")


def _tree(h: hashlib._Hash, base: Path, label: str) -> None:
    """Every entry under BASE, in a fixed order: relative path, kind and (for files) the bytes."""
    if not base.exists():
        h.update(f"{label}:absent\0".encode())
        return
    for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        rel_dir = os.path.relpath(dirpath, base)
        for d in dirnames:
            if os.path.islink(os.path.join(dirpath, d)):
                raise _Unusual(d)
            h.update(f"{label}:d:{rel_dir}/{d}\0".encode("utf-8", "surrogateescape"))
        for name in sorted(filenames):
            _file(h, Path(dirpath, name), f"{label}:f:{rel_dir}/{name}")


def _file(h: hashlib._Hash, path: Path, label: str) -> None:
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode):
            raise _Unusual(str(path))
        data = path.read_bytes()
    except OSError as exc:
        raise _Unusual(str(path)) from exc
    h.update(label.encode("utf-8", "surrogateescape") + b"\0" + str(len(data)).encode() + b"\0" + data)


def _installed(h: hashlib._Hash) -> None:
    """The distributions on sys.path (name and version are in the dist-info directory names); the first
    entry is the script's directory or the working directory, which differ between `composegen` and
    `python -m composegen` and hold no distributions."""
    for entry in sys.path[1:]:
        try:
            names = sorted(n for n in os.listdir(entry or ".") if n.endswith((".dist-info", ".egg-info", ".pth")))
        except OSError:
            continue
        h.update(f"path:{entry}:{','.join(names)}\0".encode("utf-8", "surrogateescape"))


def fingerprint(root: Path) -> str | None:
    """The hash of every input of `render --check` in project ROOT, or None when an input is unusual."""
    h = hashlib.sha256(f"v{RECORD_VERSION} composegen {__version__} {sys.version}\0".encode())
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith("COMPOSEGEN_") and k not in _UNHASHED_ENV)
    h.update(json.dumps(env).encode("utf-8", "surrogateescape"))
    _installed(h)
    try:
        _tree(h, PACKAGE_DIR, "package")
        templates = templates_dir()
        if PACKAGE_DIR not in templates.parents:
            _tree(h, templates, "templates")
        for entry in sorted(os.scandir(root), key=lambda e: e.name):  # top-level project files (edge.yaml, …)
            if entry.is_file(follow_symlinks=False):
                _file(h, Path(entry.path), f"top:{entry.name}")
        _tree(h, root / "profiles", "profiles")
        _tree(h, root / "out", "out")
    except (_Unusual, OSError, FileNotFoundError):
        return None
    return h.hexdigest()


def answer(root: Path) -> str | None:
    """The line the real check printed for exactly these inputs, or None (a miss: run the real check)."""
    if os.environ.get(DISABLE_ENV):
        return None
    try:
        record = json.loads(_record_path(root).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("version") != RECORD_VERSION:
        return None
    line = record.get("line")
    if not isinstance(line, str) or record.get("fingerprint") != fingerprint(root):
        return None
    return line


def remember(root: Path, before: str | None, line: str) -> None:
    """Record LINE for the inputs hashed BEFORE the real check ran (so a file changed during the check is
    a miss next time, never a false "fresh"); best effort: a cache that cannot be written is no error."""
    if before is None or os.environ.get(DISABLE_ENV):
        return
    record = {"version": RECORD_VERSION, "root": str(root), "fingerprint": before, "line": line}
    try:
        directory = cache_dir()
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        if directory.is_symlink() or not directory.is_dir():
            return
        atomic_write(_record_path(root), json.dumps(record, sort_keys=True) + "\n")
    except OSError:
        return
