"""Console-script entry: the few commands fastpath.py answers without typer, the rest through
main.py."""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading


def main() -> None:
    try:
        _main()
    except KeyboardInterrupt:  # Ctrl-C while modules still load, before exits.run is in charge
        sys.stderr.write("composegen: interrupted\n")
        sys.stderr.flush()
        os._exit(130)


def _main() -> None:
    # why: inside main()'s guard, Ctrl-C here exits 130
    from composegen.interrupts import deferred

    with deferred():  # a Ctrl-C inside an import breaks libraries: held until loaded
        from composegen.cli import fastpath  # why: after the guard is up, Ctrl-C is held
    code = fastpath.run(sys.argv[1:])
    if code is None:
        with deferred():
            # why: typer, the app: ~0.7 s; only off the fast path
            from composegen.cli.main import main as cli_main
        try:
            cli_main()
        except SystemExit as done:
            _leave(done)
        return
    # A one-shot answer: leave without the interpreter's teardown, which would free every object
    # of a large scan one by one (~5% of `shm --json` on 10,000 entries). Nothing else is pending.
    _flush()
    os._exit(code)


def _leave(done: SystemExit) -> None:
    """Exit with the command's code once it has finished, skipping the interpreter's teardown: after
    `up` it frees the SDK's, pydantic's and the startup parser's objects one by one (~0.3 s of CPU,
    measured, bench/up.sh). The exit handlers still run; with another thread still alive, or a
    non-integer code, the ordinary exit (which waits for that thread) is kept."""
    if not isinstance(done.code, (int, type(None))) or threading.active_count() > 1:
        raise done
    atexit._run_exitfuncs()
    _flush()
    os._exit(done.code or 0)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        # a reader that went away; exits.run has said so where it could
        with contextlib.suppress(OSError):
            stream.flush()
