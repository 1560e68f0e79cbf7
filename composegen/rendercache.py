"""`render --check` answered from a fingerprint: when the real check proved out/ fresh, it records a
hash of everything the answer depends on; a later plain `render --check` whose inputs hash the same
prints the same line without importing the renderer (cli/fastpath.py). Any difference — a profile, a
template, a file under out/, composegen's own code, an installed library, a COMPOSEGEN_* variable —
misses, and the real check runs. Nothing is rendered here, so there is no second renderer to drift
from the first.

The record lives in the user's cache directory (usercache.py), not in the project: a repository
could commit a record that says "fresh" for a stale out/, and CI must never believe it.

`up` asks the same question of one stack (`stack_fresh`): once its real comparison of out/NAME found
it fresh, an `up` with the same inputs skips rendering it again (and importing jinja2 and the
templates).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
from pathlib import Path

from composegen import __version__, usercache
from composegen.project import PACKAGE_DIR, templates_dir

KIND = "render-check"
STACK_KIND = "stack-fresh"
_UNHASHED_ENV = {usercache.DISABLE_ENV, usercache.DIR_ENV}
_SKIP_DIRS = {"__pycache__"}


class _Unusual(Exception):
    """A link, a special file or an unreadable entry among the inputs: the real check decides."""


def _key(root: Path) -> str:
    return hashlib.sha256(os.fsencode(root)).hexdigest()[:32]


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
    h.update(
        label.encode("utf-8", "surrogateescape") + b"\0" + str(len(data)).encode() + b"\0" + data
    )


def _installed(h: hashlib._Hash) -> None:
    """The distributions on sys.path (name and version are in the dist-info directory names); the
    first entry is the script's directory or the working directory, which differ between
    `composegen` and `python -m composegen` and hold no distributions."""
    for entry in sys.path[1:]:
        try:
            names = sorted(
                n
                for n in os.listdir(entry or ".")
                if n.endswith((".dist-info", ".egg-info", ".pth"))
            )
        except OSError:
            continue
        h.update(f"path:{entry}:{','.join(names)}\0".encode("utf-8", "surrogateescape"))


def fingerprint(root: Path) -> str | None:
    """The hash of every input of `render --check` in project ROOT, or None when an input is unusual
    or the caches are off (COMPOSEGEN_NO_CACHE: nothing is recorded or read, so nothing is
    hashed)."""
    if not usercache.enabled():
        return None
    h = hashlib.sha256(f"composegen {__version__} {sys.version}\0".encode())
    env = sorted(
        (k, v)
        for k, v in os.environ.items()
        if k.startswith("COMPOSEGEN_") and k not in _UNHASHED_ENV
    )
    h.update(json.dumps(env).encode("utf-8", "surrogateescape"))
    _installed(h)
    try:
        _tree(h, PACKAGE_DIR, "package")
        templates = templates_dir()
        if PACKAGE_DIR not in templates.parents:
            _tree(h, templates, "templates")
        # top-level project files (edge.yaml, …)
        for entry in sorted(os.scandir(root), key=lambda e: e.name):
            if entry.is_file(follow_symlinks=False):
                _file(h, Path(entry.path), f"top:{entry.name}")
            elif entry.name.endswith(".yaml"):  # composegen.yaml, edge.yaml: a link, a directory
                raise _Unusual(entry.path)
        _tree(h, root / "profiles", "profiles")
        _tree(h, root / "out", "out")
    except (_Unusual, OSError, FileNotFoundError):
        return None
    return h.hexdigest()


def answer(root: Path) -> str | None:
    """The line the real check printed for exactly these inputs, or None (a miss: run the real
    check)."""
    record = usercache.read(KIND, _key(root))
    if record is None:
        return None
    line = record.get("line")
    if not isinstance(line, str) or record.get("fingerprint") != fingerprint(root):
        return None
    return line


def remember(root: Path, before: str | None, line: str) -> None:
    """Record LINE for the inputs hashed BEFORE the real check ran, so a file changed during the
    check is a miss next time, never a false "fresh"."""
    if before is not None:
        usercache.write(KIND, _key(root), {"root": str(root), "fingerprint": before, "line": line})


def stack_fresh(root: Path, name: str) -> bool:
    """out/NAME was proved fresh for exactly these inputs (the whole project's, as for `render
    --check`)."""
    record = usercache.read(STACK_KIND, _key(root / "out" / name))
    return record is not None and record.get("fingerprint") == fingerprint(root)


def remember_stack(root: Path, name: str, before: str | None) -> None:
    """out/NAME matched its rendering for the inputs hashed BEFORE the comparison ran."""
    if before is not None:
        usercache.write(
            STACK_KIND, _key(root / "out" / name), {"root": str(root), "fingerprint": before}
        )
