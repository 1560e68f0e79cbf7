"""`composegen edge keys add|list|rotate|revoke`: the edge's per-client keys (docs/edge.md). The
old top-level `keys` still works for one release (aliases.py)."""

from __future__ import annotations

import typer

from composegen.cli.app import JsonOpt
from composegen.cli.app import project as _project
from composegen.cli.optiongroups import option
from composegen.edge import keys
from composegen.edge.reports import ClientRow, ClientsReport, client_rows
from composegen.errors import BadInput
from composegen.output import Output, err, out

keys_app = typer.Typer(
    no_args_is_help=True,
    help="Per-client keys of the edge (shown once, stored hashed).\n\n"
    "Example: composegen edge keys add alice  # in examples/team-edge",
)


@keys_app.command("add")
def keys_add(
    name: str = typer.Argument(..., help="The client's name (shown in the access log)."),
    expires: str | None = option(None, "--expires", "YYYY-MM-DD (00:00 UTC) or an ISO 8601 time."),
) -> None:
    """Make a key for a new client and print it — once; only its hash is kept.

    Example: composegen edge keys add bob --expires 2027-01-31  # in examples/team-edge
    """
    key = keys.add(_project(), name, expires)
    err(f"client {name}: key made; it is shown only now — store it, it cannot be shown again")
    out(key)


@keys_app.command("rotate")
def keys_rotate(name: str = typer.Argument(..., help="An existing client.")) -> None:
    """A new key for a client (printed once); the old key stops working at once.

    Example: composegen edge keys rotate alice  # in examples/team-edge
    """
    key = keys.rotate(_project(), name)
    err(f"client {name}: new key; the old one no longer works — the new one is shown only now")
    out(key)


@keys_app.command("revoke")
def keys_revoke(name: str = typer.Argument(..., help="An existing client.")) -> None:
    """Revoke a client's key at once (the record stays, marked revoked).

    Example: composegen edge keys revoke alice  # in examples/team-edge
    """
    keys.revoke(_project(), name)
    out(f"client {name}: revoked")


@keys_app.command("list")
def keys_list(json_: bool = JsonOpt) -> None:
    """The clients: name, state (active, expired, revoked), created, expiry — never a key.

    Example: composegen edge keys list  # in examples/team-edge
    """
    rows = client_rows(keys.listing(_project()))
    lines = [
        f"{row.name:<24} {row.state:<8} created {row.created}  expires {row.expires or 'never'}"
        for row in rows
    ]
    none = "no clients (add one: composegen edge keys add NAME)"
    Output(json_).report(ClientsReport(clients=rows), "\n".join(lines) or none)
    _refuse_bad_records(rows)


def _refuse_bad_records(rows: list[ClientRow]) -> None:
    """Exit 2 naming each record of keys.json not as composegen writes it (the rest were listed)."""
    bad = [f"{row.name}: {row.problem}" for row in rows if row.problem]
    if bad:
        raise BadInput(
            f".composegen/edge/keys.json: {'; '.join(bad)}",
            hint="fix the record by hand, or `composegen edge keys revoke NAME` and add it anew",
        )
