"""What `composegen shm` prints for a directory, a container or a reclaim (fastpath.py and the typer
commands in shm_commands.py both print through here).

Compact JSON of a directory goes from the scan's rows to stdout without a model (shm/fastjson.py:
pydantic is never imported on that path); text, indented JSON and a container's scan print the
ShmScan model; a reclaim prints ShmReclaim. `--fail-on-leftover` turns leftovers into exit 1.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from composegen.errors import CheckFailed
from composegen.output import Output as Output  # fastpath.py makes its Output through here
from composegen.output import pretty_output, terminal_width, write_pieces
from composegen.shm import fastjson, procscan
from composegen.shm.text import format_reclaim_text, format_text

if TYPE_CHECKING:  # the models' pydantic loads only where a model is printed
    from composegen.shm.reports import ShmReclaim, ShmScan


def print_path_scan(
    path: str,
    show: Output,
    *,
    fail_on_leftover: bool = False,
    force: bool = False,
    labels: procscan.LabelResolver | None = None,
) -> None:
    """`composegen shm [--path DIR] [--json] [--force]`: piped JSON straight from the scan's
    rows."""
    if show.json and not pretty_output():  # the one shape printed without its model: speed
        head, pieces = fastjson.scan_json(path, container_labels=labels, tmpfs_only=not force)
        write_pieces(pieces)
        check_leftovers(head["totals"]["leftover"]["count"], head["path"], fail_on_leftover)
        return
    # why: pydantic (~0.1-0.25 s) only here; the compact JSON builds no model
    from composegen.shm import scan

    report = scan.scan(path, container_labels=labels, tmpfs_only=not force)
    print_scan(report, show, fail_on_leftover)


def print_scan(report: ShmScan, show: Output, fail_on_leftover: bool = False) -> None:
    """A scan as JSON or text (a terminal's width folds the holders; piped, full rows)."""
    show.report(report, lambda: format_text(report, terminal_width()))
    check_leftovers(report.totals.leftover.count, report.path, fail_on_leftover)


def print_reclaim(result: ShmReclaim, show: Output, fail_on_leftover: bool = False) -> None:
    """A reclaim's preview or result; with fail_on_leftover, leftovers still present (or, in a
    preview, about to be removed) fail the check."""
    show.report(result, lambda: format_reclaim_text(result))
    if not result.applied:
        left, verb = len(result.candidates), "present"
    else:
        left, verb = result.remaining.totals.leftover.count if result.remaining else 0, "remain"
    if fail_on_leftover and left:
        raise CheckFailed(f"{left} leftover file(s) {verb} in {result.path}")


def check_leftovers(count: int, path: str, fail_on_leftover: bool) -> None:
    if fail_on_leftover and count:
        raise CheckFailed(f"{count} leftover file(s) in {path}")
