"""`composegen wait NAME`: attach to a stack that is starting and show its load until it is ready.
cli/main.py loads this module only when a run names `wait` (or lists every command), under its
Ctrl-C guard, so what the command needs is imported at top level.
"""

from __future__ import annotations

import math

from composegen.cli.app import JsonOpt, StackArg, app
from composegen.cli.app import load_profile as _load
from composegen.cli.console import ConsoleSink, with_stages
from composegen.cli.interrupts import deferred_sigint
from composegen.cli.optiongroups import option
from composegen.cli.readysummary import summary_text
from composegen.cli.stagelines import estimate
from composegen.errors import BadInput
from composegen.output import Output, terminal_width
from composegen.stack import driver


@app.command()
def wait(
    name: str = StackArg,
    timeout: float | None = option(
        None,
        "--timeout",
        "Seconds to wait (default: what is left of startup_timeout since the start).",
    ),
    json_: bool = JsonOpt,
) -> None:
    """Attach to a starting stack: its load, stage by stage, until ready (0), failed (3) or Ctrl-C
    (130).

    Example: composegen up starter --no-wait --emulate && composegen wait starter
    """
    if timeout is not None and (not math.isfinite(timeout) or timeout <= 0):
        raise BadInput(f"--timeout must be a positive number of seconds, got {timeout:g}")
    # a Ctrl-C inside an import breaks libraries: held until they are loaded
    with deferred_sigint():
        driver.preload()
    project, r = _load(name)
    with ConsoleSink(timeout_s=timeout or r.profile.service.startup_timeout, quiet=json_) as sink:
        estimate(sink.tracker, project, name)
        report = driver.attach(project, r, sink, timeout)
    report = with_stages(report, sink)
    Output(json_).report(report, lambda: summary_text(report, terminal_width()))
