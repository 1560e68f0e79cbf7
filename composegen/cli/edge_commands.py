"""`composegen edge up|down|status|recover|ca`, `edge keys …` (edge_keys.py) (docs/edge.md);
`promote` and `rollback` are promote_commands.py."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from composegen.cli.app import JsonOpt, app
from composegen.cli.app import project as _project
from composegen.cli.edge_keys import keys_app
from composegen.edge import exposure, recovery, service
from composegen.edge.reports import ExposureReport
from composegen.edge.status import edge_status as read
from composegen.edge.status import format_text
from composegen.errors import CheckFailed
from composegen.evidence import capture
from composegen.output import Output, out

if TYPE_CHECKING:  # annotations only: these modules load lazily (start-up time)
    from composegen.profiles.resolved import Resolved
    from composegen.project import Project

edge_app = typer.Typer(
    no_args_is_help=True,
    help="The edge: TLS, the route allowlist, per-client keys, aliases (composegen docs edge)."
    "\n\nExample: composegen edge up  # in examples/team-edge",
)
app.add_typer(edge_app, name="edge")
edge_app.add_typer(keys_app, name="keys")  # the clients' keys are the edge's state


@edge_app.command("up")
def edge_up() -> None:
    """Start (or update) the edge from out/edge/; a changed Caddyfile is reloaded gracefully.

    Example: composegen edge up  # in examples/team-edge
    """
    edge = service.up(_project())
    out(
        f"edge {edge.config.name}: up at {edge.url} (tls {edge.config.tls.mode}), stacks: {', '.join(edge.stacks)}"
    )


@edge_app.command("down")
def edge_down() -> None:
    """Stop and remove the edge's containers (the stacks behind it keep running, unreachable).

    Example: composegen edge down  # in examples/team-edge
    """
    edge = service.down(_project())
    out(f"edge {edge.config.name}: down")


@edge_app.command("status")
def edge_status(json_: bool = JsonOpt) -> None:
    """The edge: URL, TLS mode, containers, each alias → profile (and a switch in progress), the
    clients.

    Example: composegen edge status --json  # in examples/team-edge
    """
    report = read(_project())
    Output(json_).report(report, lambda: format_text(report))


@edge_app.command("recover")
def edge_recover(json_: bool = JsonOpt) -> None:
    """Undo a switch whose composegen was killed: the alias stays on the stack it had, that stack
    serves again, the other is stopped, the 503 marks go (composegen docs edge: recovery).

    Example: composegen edge recover  # in examples/team-edge
    """
    project = _project()
    result = recovery.recover(project, service.load(project))
    where = f"; {result.alias} → {result.profile}" if result.alias else ""
    Output(json_).report(result, f"{result.action}{where} ({result.seconds:.1f} s)")


@edge_app.command("ca")
def edge_ca() -> None:
    """Print the root certificate of the edge's internal CA (tls: internal) for clients to trust.

    Example: composegen edge ca > edge-root.crt  # in examples/team-edge
    """
    out(service.root_certificate(_project()).rstrip("\n"))


def exposure_gate(project: Project, r: Resolved, json_: bool) -> None:
    """`gate NAME --exposure`: the matrix into a bundle (exposure.json); exit 1 if a route leaks."""
    result = exposure_matrix(project, r)
    run = capture.capture_stack(project, r, extra_raw={"exposure.json": result})
    show = Output(json_)
    show.report(result.model_copy(update={"run": project.rel(run)}), exposure.format_text(result))
    show.say(f"evidence: {project.rel(run)}")
    if not result.passed:
        msg = f"{result.failed} route(s) reachable past the edge where they must not be"
        raise CheckFailed(msg)


def exposure_matrix(project: Project, r: Resolved) -> ExposureReport:
    """The exposure gate's result for a stack behind the edge (CheckFailed when it is not)."""
    return exposure.for_stack(project, r)
