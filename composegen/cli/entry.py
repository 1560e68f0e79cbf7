"""Console-script entry: the few commands fastpath.py answers without typer, the rest through cli.py."""

from __future__ import annotations

import contextlib
import os
import sys


def main() -> None:
    try:
        _main()
    except KeyboardInterrupt:  # Ctrl-C while modules still load, before exits.run is in charge
        sys.stderr.write("composegen: interrupted\n")
        sys.stderr.flush()
        os._exit(130)


def _main() -> None:
    from composegen.cli.interrupts import deferred_sigint

    with deferred_sigint():  # a Ctrl-C inside an import breaks libraries: held until loaded
        from composegen.cli import fastpath
    code = fastpath.run(sys.argv[1:])
    if code is None:
        with deferred_sigint():
            from composegen.cli.main import main as cli_main
        cli_main()
        return
    # A one-shot answer: leave without the interpreter's teardown, which would free every object of a
    # large scan one by one (~5% of `shm --json` on 10,000 entries). Nothing else is pending.
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError):  # a reader that went away; exits.run has said so where it could
            stream.flush()
    os._exit(code)
