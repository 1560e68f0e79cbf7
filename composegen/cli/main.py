"""The command line: parse arguments, call the core, print — nothing else lives in the cmd_* modules.

Exit codes (mapped in exits.py, defined in errors.py): 0 ok, 1 check failed / differs, 2 bad input,
3 engine or stack failure, 130 Ctrl-C.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

# Importing the command modules registers their commands, in the order `--help` lists them.
from composegen.cli import profile_commands as cmd_profiles  # noqa: F401
from composegen.cli import stack_commands as cmd_stack  # noqa: F401
from composegen.cli import wait_command as cmd_wait  # noqa: F401

from composegen.cli import evidence_commands as cmd_evidence  # noqa: F401  # isort: skip
from composegen.cli import bench_commands as cmd_bench  # noqa: F401  # isort: skip
from composegen.cli import init_command  # noqa: F401  # isort: skip
from composegen.cli import weights_commands as cmd_weights  # noqa: F401  # isort: skip
from composegen.cli import top_command  # noqa: F401  # isort: skip
from composegen.cli import setup_commands  # noqa: F401  # isort: skip
from composegen.cli import campaign_commands  # noqa: F401  # isort: skip
from composegen.cli import edge_commands  # noqa: F401  # isort: skip
from composegen.cli import exits
from composegen.cli.app import app
from composegen.errors import BAD_INPUT, INTERRUPTED


def _click_exceptions() -> Any:
    """Typer vendors click (typer._click) in recent releases; find its exception module either way."""
    try:
        return importlib.import_module("typer._click.exceptions")
    except ImportError:  # older typer: plain click
        return importlib.import_module("click.exceptions")


def main() -> None:
    click_exc = _click_exceptions()
    abort = getattr(click_exc, "Abort", KeyboardInterrupt)  # not every vendored click has Abort

    def command() -> int | None:
        try:
            code = app(standalone_mode=False)
            if code == INTERRUPTED:  # typer turns a Ctrl-C no command caught into a silent Exit(130)
                raise KeyboardInterrupt
            return code
        except abort:
            raise KeyboardInterrupt from None
        except click_exc.ClickException as exc:  # usage errors: click prints them itself
            exc.show()
            # A bare `composegen` shows help: that is not an error.
            return 0 if type(exc).__name__ == "NoArgsIsHelpError" else BAD_INPUT

    sys.exit(exits.run(command))
