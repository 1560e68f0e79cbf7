"""Ctrl-C while modules load: held until the imports are done, then raised as KeyboardInterrupt.

A SIGINT that lands inside an import leaves half-initialised modules behind; libraries with a bare
`except:` around an optional import (or a native extension) then fail later with an unrelated error
(seen: AttributeError in requests, NameError in asyncio, a pyo3 panic), or the interpreter exits
without a word. Imports done under `deferred_sigint()` finish first; the interrupt then arrives at a
point exits.run handles (exit 130 with a message).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def deferred_sigint() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread receives signals
        return
    pending: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: pending.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if pending:
        raise KeyboardInterrupt
