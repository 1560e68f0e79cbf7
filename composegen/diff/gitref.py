"""Read one file's text as it was at a git revision: the `REF:path` inputs of `composegen diff`.

A path is relative to `root` (which may be a subdirectory of the work tree), not to the
repository's top level. Every failure (no git, not a repository, unknown revision, missing path, a
directory, undecodable bytes) is a `BadInput` whose message starts with the spec, `REF:path: git:
problem`, never a git traceback."""

from __future__ import annotations

import subprocess
from pathlib import Path

from composegen.errors import BadInput

GIT_TIMEOUT_S = 30
MAX_BLOB_BYTES = 1 << 20  # as for files: a compose file is a few kB


def split_ref_spec(spec: str) -> tuple[str, str] | None:
    """`REF:path` → (REF, path); None when the spec is not of that form.

    Git ref names may not contain ':' (git-check-ref-format), so the first ':' separates them."""
    ref, sep, path = spec.partition(":")
    if not sep or not ref.strip() or not path.strip():
        return None
    return ref, path


def read_at_ref(root: Path, ref: str, path: str) -> str:
    """The text of `path` (relative to `root`) at `ref` of the repository containing `root`."""
    spec = f"{ref}:{path}"
    root = Path(root)
    if ref.startswith("-"):
        # Would be taken for a git option; no revision name starts with '-'.
        raise BadInput(f"{spec}: git: '{ref}' is not a revision")
    rel = _relative_to_root(root, path, spec)
    toplevel = _git(root, ["rev-parse", "--show-toplevel"], spec)
    if toplevel.returncode != 0:
        if b"not a git repository" in toplevel.stderr or not root.is_dir():
            raise BadInput(f"{spec}: git: {root} is not inside a git repository")
        # e.g. "detected dubious ownership": git's own words say what to fix.
        raise BadInput(f"{spec}: git: {_first_line(toplevel.stderr)}")
    commit = _git(root, ["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], spec)
    if commit.returncode != 0:
        raise BadInput(f"{spec}: git: unknown revision '{ref}'")
    # './' makes git resolve the path against the working directory (root), not the top level.
    object_name = f"{ref}:./{rel}"
    kind = _git(root, ["cat-file", "-t", object_name], spec)
    if kind.returncode != 0:
        raise BadInput(f"{spec}: git: '{rel}' does not exist at {ref}")
    if kind.stdout.strip() != b"blob":
        raise BadInput(
            f"{spec}: git: '{rel}' is a {kind.stdout.decode().strip()} at {ref}, not a file"
        )
    size = _git(root, ["cat-file", "-s", object_name], spec)
    if size.returncode == 0 and int(size.stdout.strip() or 0) > MAX_BLOB_BYTES:
        raise BadInput(
            f"{spec}: git: '{rel}' at {ref} is larger than {MAX_BLOB_BYTES >> 20} MiB; not a compose file"
        )
    blob = _git(root, ["cat-file", "blob", object_name], spec)
    if blob.returncode != 0:
        raise BadInput(f"{spec}: git: cannot read '{rel}' at {ref}: {_first_line(blob.stderr)}")
    try:
        return blob.stdout.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{spec}: git: '{rel}' at {ref} is not UTF-8 text ({exc.reason})") from None


def _relative_to_root(root: Path, path: str, spec: str) -> str:
    candidate = Path(path)
    if not candidate.is_absolute():
        return candidate.as_posix()
    try:
        return candidate.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        raise BadInput(f"{spec}: git: {path} is outside {root}") from None


def _git(root: Path, args: list[str], spec: str) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, timeout=GIT_TIMEOUT_S, check=False
        )
    except FileNotFoundError:
        raise BadInput(f"{spec}: git: the git program is not installed") from None
    except subprocess.TimeoutExpired:
        raise BadInput(f"{spec}: git: 'git {args[0]}' took longer than {GIT_TIMEOUT_S}s") from None


def _first_line(data: bytes) -> str:
    text = data.decode("utf-8", "replace").strip()
    return text.splitlines()[0] if text else "no message"
