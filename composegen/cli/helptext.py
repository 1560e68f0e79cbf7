"""How --help names things, for people: `NAME` and `[RUNS]...` in usage lines (typer's plain help
says `{name}`), `<str>` / `<float>` for a value (not `<list[str]>` or `<float range>`: `...` says
"several", the range is printed next to it), and each `--json` help naming its own report
(`composegen schema --report up`).

`install()` adapts typer's help rendering once, at import of the CLI; a typer without these hooks
keeps its own wording (help text only: parsing is untouched).
"""

from __future__ import annotations

import re
from typing import Any

# The report of a command's --json when it is not the command's words joined by `-` (see
# cli/reports.py).
JSON_REPORT = {
    "render": "render (render-check with --check)",
    "qualify": "qualify (qualify-alias with --alias)",
    "edge keys list": "keys",
}
_LIST = re.compile(r"^<list\[(.*)\]>$")
_RANGE = re.compile(r" range>$")


def install() -> None:
    try:
        from typer import core
    except ImportError:  # pragma: no cover - typer is a dependency
        return
    param, argument, option = (
        getattr(core, n, None) for n in ("_TyperParameter", "TyperArgument", "TyperOption")
    )
    if (
        param is None
        or argument is None
        or option is None
        or getattr(param, "_composegen_help", False)
    ):
        return
    if hasattr(param, "display_type"):
        original_type = param.display_type

        def display_type(self: Any, ctx: Any) -> str:
            return _RANGE.sub(">", _LIST.sub(r"<\1>", original_type(self, ctx)))

        param.display_type = display_type
    if hasattr(argument, "_usage_display_name"):

        def usage_name(self: Any) -> str:
            name = str(self.metavar or self.name or "").upper()
            return (name if self.required else f"[{name}]") + ("..." if self.nargs != 1 else "")

        argument._usage_display_name = usage_name
    original_record = option.get_help_record

    def help_record(self: Any, ctx: Any) -> Any:
        record = original_record(self, ctx)
        if record and "--json" in self.opts and ctx is not None and ctx.command is not None:
            name = _command_words(ctx)
            report = JSON_REPORT.get(name, name.replace(" ", "-"))
            record = (record[0], record[1].replace("--report NAME", f"--report {report}"))
        return record

    option.get_help_record = help_record
    if group := getattr(core, "TyperGroup", None):
        group.format_commands = _format_commands
    param._composegen_help = True


def _format_commands(self: Any, ctx: Any, formatter: Any) -> None:
    """Plain help with typer's panels (`rich_help_panel`): one section a panel, in first-seen order."""
    panels: dict[str, list[tuple[str, Any]]] = {}
    for name in self.list_commands(ctx):
        if (cmd := self.get_command(ctx, name)) is not None and not cmd.hidden:
            panel = getattr(cmd, "rich_help_panel", None) or "Commands"
            panels.setdefault(panel, []).append((name, cmd))
    width = max((len(n) for rows in panels.values() for n, _ in rows), default=0)
    limit = formatter.width - 6 - width
    for title, rows in panels.items():
        with formatter.section(title):
            formatter.write_dl([(n.ljust(width), c.get_short_help_str(limit)) for n, c in rows])


def _command_words(ctx: Any) -> str:
    """`shm reclaim`, `edge keys list`: the command's words after the program's name."""
    words = []
    while ctx is not None and ctx.parent is not None:
        words.append(ctx.info_name or "")
        ctx = ctx.parent
    return " ".join(reversed(words))
