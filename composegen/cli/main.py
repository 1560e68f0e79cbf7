"""The command line: parse arguments, call the core, print — nothing else lives in the command
modules.

Exit codes (mapped in exits.py, defined in errors.py): 0 ok, 1 check failed / differs, 2 bad input,
3 engine or stack failure, 130 Ctrl-C.

Command modules are loaded lazily, here and nowhere else: each module imports what its commands need
at top level and registers them on the typer app when imported. A run imports only the module of the
command it names (`up` never loads the evidence or edge commands, `render` never the docker
libraries); `--help`, completion, a bare `composegen` and anything this table does not know load
every module, so click sees the whole CLI exactly when it must list or suggest commands.
tests/cli/test_lazy_commands.py keeps COMMANDS equal to what the modules register.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import typer.main

from composegen.cli import aliases, exits
from composegen.cli.app import app
from composegen.errors import BAD_INPUT, INTERRUPTED
from composegen.interrupts import deferred

# Every top-level command and group -> its module, in the panels of `--help` (as people meet them).
PANELS: dict[str, dict[str, str]] = {
    "Start here": {"init": "init_command", "doctor": "setup_commands", "docs": "docs_command"},
    "Describe and render": dict.fromkeys(["list", "validate", "show"], "profile_commands")
    | {"render": "render_command", "diff": "diff_command", "schema": "profile_commands"},
    "Run a stack": dict.fromkeys(["up", "wake", "wait"], "up_command")
    | dict.fromkeys(["status", "logs", "startup"], "stack_commands")
    | {"top": "top_command", "down": "stack_commands"},
    "Prove": {"campaign": "campaign_commands", "qualify": "qualify_command"}
    | dict.fromkeys(["gate", "ladder", "evidence", "compare"], "evidence_commands")
    | {"bench": "bench_commands", "report": "bench_commands", "plan": "verdict_commands"},
    "Serve a team": {"edge": "edge_commands"}
    | dict.fromkeys(["promote", "rollback"], "promote_commands"),
    "Maintain the host": {"provision": "setup_commands", "weights": "weights_commands"}
    | {"shm": "shm_commands", "cache": "cache_commands"},
}
COMMANDS = {name: module for panel in PANELS.values() for name, module in panel.items()}
PANEL = {name: title for title, panel in PANELS.items() for name in panel}
MODULES = list(dict.fromkeys(COMMANDS.values()))
_GLOBAL_FLAGS = {"--version"}  # global options that take no value; --root takes one


def command_name(argv: list[str]) -> str | None:
    """The command ARGV names after the global options, or None (help, completion, an unknown
    option)."""
    rest = iter(argv)
    for arg in rest:
        if arg == "--root":
            next(rest, None)
        elif arg.startswith("--root=") or arg in _GLOBAL_FLAGS:
            continue
        else:
            return None if arg.startswith("-") else arg
    return None


def load_commands(argv: list[str] | None = None) -> None:
    """Import the command module ARGV needs (all of them without ARGV, or when it names no known
    command), then put the registrations in table order: what `--help` lists never depends on what
    loaded first."""
    name = (
        command_name(argv)
        if argv is not None and "_COMPOSEGEN_COMPLETE" not in os.environ
        else None
    )
    wanted = [COMMANDS[name]] if name in COMMANDS else MODULES
    # a Ctrl-C inside an import breaks libraries: held until they are loaded
    with deferred():
        for module in wanted:
            importlib.import_module(f"composegen.cli.{module}")
    rank = {name: i for i, name in enumerate(COMMANDS)}
    infos: list[Any] = [*app.registered_commands, *app.registered_groups]
    for info in infos:
        info.name = info.name or typer.main.get_command_name(getattr(info.callback, "__name__", ""))
        info.rich_help_panel = PANEL[info.name]  # helptext draws the panels in plain help
    app.registered_commands.sort(key=lambda c: rank[c.name or ""])
    app.registered_groups.sort(key=lambda g: rank[g.name or ""])


def _click_exceptions() -> Any:
    """Typer vendors click (typer._click) in recent releases; find its exception module either
    way."""
    try:
        return importlib.import_module("typer._click.exceptions")
    except ImportError:  # older typer: plain click
        return importlib.import_module("click.exceptions")


def main() -> None:
    argv = sys.argv[1:]
    if "_COMPOSEGEN_COMPLETE" not in os.environ:  # completion lists today's spellings only
        argv = aliases.rewrite(argv)
    load_commands(argv)
    click_exc = _click_exceptions()
    abort = getattr(click_exc, "Abort", KeyboardInterrupt)  # not every vendored click has Abort

    def command() -> int | None:
        try:
            code = app(args=argv, standalone_mode=False)
            # typer turns a Ctrl-C no command caught into a silent Exit(130)
            if code == INTERRUPTED:
                raise KeyboardInterrupt
            return code
        except abort:
            raise KeyboardInterrupt from None
        except click_exc.ClickException as exc:  # usage errors: click prints them itself
            exc.show()
            # A bare `composegen` shows help: that is not an error.
            return 0 if type(exc).__name__ == "NoArgsIsHelpError" else BAD_INPUT

    sys.exit(exits.run(command))
