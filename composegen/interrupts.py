"""Signals held while a block runs, then acted on once, as their handler would have.

Ctrl-C inside an import leaves half-initialised modules behind (libraries with a bare `except:` around
an optional import then fail later with an unrelated error: AttributeError in requests, NameError in
asyncio, a pyo3 panic), so the CLI's imports run under `deferred()`. A /sleep cut short leaves an
engine falling asleep after an undo found it awake, so stack/sleepmode.py holds SIGINT, SIGTERM and
SIGHUP until the sleep is answered and recorded.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def deferred(*signums: int) -> Iterator[None]:
    """SIGNUMS (SIGINT if none) held until the block ends, even by an error; then the first one acts
    through the handler it had (a second acts at once). One ignored (nohup), set outside Python, or
    off the main thread (only it receives signals) is left alone."""
    main, got = threading.current_thread() is threading.main_thread(), list[int]()
    handlers = {s: signal.getsignal(s) for s in signums or (signal.SIGINT,) if main}
    previous = {s: h for s, h in handlers.items() if h is not None and h != signal.SIG_IGN}

    def restore() -> None:
        for s, handler in previous.items():
            signal.signal(s, handler)

    def hold(signum: int, _: object) -> None:
        got.append(signum)
        restore()

    try:
        for s in previous:
            if not got:  # one came already: the rest stay as they were
                signal.signal(s, hold)
        yield
    except KeyboardInterrupt:  # a second signal acted: the first is not replayed over it
        got.clear()
        raise
    finally:
        restore()
        for signum in got[:1]:
            signal.raise_signal(signum)
