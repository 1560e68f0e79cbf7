"""The one place an outcome becomes an exit code and a message (codes are defined in errors.py).

Both the typer CLI (main.py) and the commands answered before typer loads (fastpath.py) run through
`run`, so a given failure prints the same line and exits the same way on either path.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable
from pathlib import Path

from composegen import safewrite
from composegen.errors import INTERRUPTED, RUNTIME, ComposegenError
from composegen.output import err


def run(command: Callable[[], int | None]) -> int:
    """Call `command`; return its exit code, or the code of what it raised, after saying why."""
    try:
        return command() or 0
    except ComposegenError as exc:
        err(
            exc.message
            if exc.message.startswith(("profiles/", "out/", "/"))
            else f"composegen: {exc.message}"
        )
        if exc.details:
            err(exc.details)
        if exc.hint:
            err(f"hint: {exc.hint}")
        return exc.exit_code
    except KeyboardInterrupt:
        err("composegen: interrupted")
        return INTERRUPTED
    # e.g. `composegen shm --json | head`: the reader left; no traceback for that
    except BrokenPipeError:
        err("composegen: output closed early (broken pipe)")
        return RUNTIME
    # the machine said no (a full disk, a read-only mount, a lost device): not a bug
    except OSError as exc:
        where = f": {exc.filename}" if exc.filename else ""
        err(f"composegen: {exc.strerror or type(exc).__name__}{where}")
        return RUNTIME
    except Exception as exc:
        err(f"composegen: internal error: {type(exc).__name__}: {exc} ({_crash_log(exc)})")
        return RUNTIME


def _crash_log(exc: BaseException) -> str:
    """Where the traceback went ("traceback in PATH"), or why nowhere: never a second traceback."""
    text = "".join(traceback.format_exception(exc))
    path = (
        Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "composegen" / "crash.log"
    )
    # private: a traceback can show paths, arguments and values (0700 directory, 0600 file, no
    # links)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        safewrite.write(path, text, private=True)
        return f"traceback in {path}"
    # a link or FIFO planted there, a full disk: a fresh 0600 file elsewhere
    except (OSError, ComposegenError):
        import tempfile  # stdlib, for this fallback alone

        try:
            fd, name = tempfile.mkstemp(prefix="composegen-crash-", suffix=".log")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as exc2:
            return f"no traceback written: {exc2.strerror or type(exc2).__name__}"
    return f"traceback in {name}"
