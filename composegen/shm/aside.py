"""Run one function in a forked child, on another core, while the caller gets on with its own work.

Python threads would not overlap two interpreter-bound halves (the GIL); a forked child does, and
inherits everything it needs without pickling. The result comes back through a pipe with marshal,
so it must be built of plain types (dict, list, tuple, set, str, int, float, bytes, None).

Falls back to calling the function inline when fork is unavailable, when other Python threads exist
(forking a threaded process can deadlock the child), and when the child fails for any reason — so
`Aside(f, x).result()` always equals `f(x)`. Use it as a context manager so the child is reaped."""

from __future__ import annotations

import marshal
import os
import sys
from collections.abc import Callable
from typing import Any


class Aside:
    def __init__(self, function: Callable[..., Any], *args: Any):
        self._function, self._args = function, args
        self._pid: int | None = None
        self._read_fd: int | None = None
        if hasattr(os, "fork") and _single_threaded():
            self._start()

    def _start(self) -> None:
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # child: compute, send, and leave without running the parent's cleanup
            code = 1
            try:
                os.close(read_fd)
                data = marshal.dumps(self._function(*self._args))
                with os.fdopen(write_fd, "wb") as pipe:
                    pipe.write(data)
                code = 0
            finally:
                os._exit(code)
        os.close(write_fd)
        self._pid, self._read_fd = pid, read_fd

    def result(self) -> Any:
        if self._pid is None or self._read_fd is None:
            return self._function(*self._args)
        # the file object owns it now, even if Ctrl-C lands in read()
        fd, self._read_fd = self._read_fd, None
        with os.fdopen(fd, "rb") as pipe:
            data = pipe.read()
        status = os.waitpid(self._pid, 0)[1]
        self._pid = None
        if os.waitstatus_to_exitcode(status) != 0 or not data:
            return self._function(*self._args)
        return marshal.loads(data)

    def __enter__(self) -> Aside:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._read_fd is not None:
            os.close(self._read_fd)  # a child still writing gets EPIPE and exits
            self._read_fd = None
        if self._pid is not None:
            os.waitpid(self._pid, 0)
            self._pid = None


def _single_threaded() -> bool:
    threading = sys.modules.get("threading")  # never imported: no Python thread was started
    return threading is None or threading.active_count() == 1
