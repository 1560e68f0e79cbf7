"""composegen's caches: small JSON records in the user's cache directory ($COMPOSEGEN_CACHE_DIR,
else
$XDG_CACHE_HOME/composegen, else ~/.cache/composegen) — never inside a project, where a repository could
commit a record. A missing, unreadable or foreign record is a miss; a record that cannot be written
is no error. COMPOSEGEN_NO_CACHE=1 turns every cache off.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from composegen import safewrite
from composegen.errors import ComposegenError

DISABLE_ENV = "COMPOSEGEN_NO_CACHE"
DIR_ENV = "COMPOSEGEN_CACHE_DIR"
RECORD_VERSION = 1


def enabled() -> bool:
    return not os.environ.get(DISABLE_ENV)


def cache_dir() -> Path:
    if os.environ.get(DIR_ENV):
        return Path(os.environ[DIR_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "composegen"


def _path(kind: str, key: str) -> Path:
    return cache_dir() / kind / f"{key}.json"


def read(kind: str, key: str) -> dict[str, Any] | None:
    """The record of KIND under KEY (a hex string), or None."""
    if not enabled():
        return None
    try:
        record = json.loads(_path(kind, key).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("version") != RECORD_VERSION:
        return None
    return record


def write(kind: str, key: str, record: dict[str, Any]) -> None:
    if not enabled():
        return
    try:
        directory = cache_dir() / kind
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        if any(p.is_symlink() for p in (directory, directory.parent)):
            return  # never write through a link someone planted
        record = {**record, "version": RECORD_VERSION}
        safewrite.write(
            directory / f"{key}.json",
            json.dumps(record, sort_keys=True),
            base=cache_dir(),
            private=True,
        )
    except (OSError, ComposegenError):  # a cache that cannot be written is no error
        return


def forget(kind: str, key: str) -> None:
    try:
        _path(kind, key).unlink()
    except OSError:
        return
