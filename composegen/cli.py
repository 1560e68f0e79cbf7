"""The command line: parse arguments, call the core, print — nothing else lives in the cmd_* modules.

Exit codes (one place, see errors.py): 0 ok, 1 check failed / differs, 2 bad input,
3 engine or stack failure, 130 Ctrl-C.
"""
from __future__ import annotations

import sys
from pathlib import Path

# Importing the command modules registers their commands, in the order `--help` lists them.
from composegen import cmd_profiles  # noqa: F401
from composegen import cmd_stack  # noqa: F401
from composegen import cmd_evidence  # noqa: F401  # isort: skip
from composegen.cli_app import app
from composegen.errors import BAD_INPUT, INTERRUPTED, RUNTIME, ComposegenError
from composegen.output import err


def _click_exceptions():
    """Typer vendors click (typer._click) in recent releases; find its exception module either way."""
    try:
        from typer._click import exceptions  # type: ignore[attr-defined]
    except ImportError:  # older typer: plain click
        from click import exceptions
    return exceptions


def main() -> None:
    click_exc = _click_exceptions()
    try:
        rc = app(standalone_mode=False)
    except ComposegenError as exc:
        err(f"composegen: {exc.message}" if not exc.message.startswith(("profiles/", "out/", "/")) else exc.message)
        if exc.details:
            err(exc.details)
        if exc.hint:
            err(f"hint: {exc.hint}")
        sys.exit(exc.exit_code)
    except (KeyboardInterrupt, getattr(click_exc, "Abort", KeyboardInterrupt)):
        err("composegen: interrupted")
        sys.exit(INTERRUPTED)
    except click_exc.ClickException as exc:
        exc.show()
        # A bare `composegen` shows help: that is not an error.
        sys.exit(0 if type(exc).__name__ == "NoArgsIsHelpError" else BAD_INPUT)
    except Exception as exc:  # noqa: BLE001 - the one place an unexpected error becomes a message
        log = _crash_log(exc)
        err(f"composegen: internal error: {type(exc).__name__}: {exc} (traceback in {log})")
        sys.exit(RUNTIME)
    sys.exit(rc or 0)


def _crash_log(exc: BaseException) -> str:
    import os
    import tempfile
    import traceback

    path = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "composegen" / "crash.log"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(traceback.format_exception(exc)), encoding="utf-8")
    except OSError:
        path = Path(tempfile.gettempdir()) / "composegen-crash.log"
        path.write_text("".join(traceback.format_exception(exc)), encoding="utf-8")
    return str(path)

