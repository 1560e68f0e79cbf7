"""`composegen edge up|down|ca`, `keys add|list|revoke|rotate`, `promote`, `rollback` (docs/edge.md)."""

from __future__ import annotations

import typer

from composegen.cli.app import JsonOpt, app
from composegen.cli.app import project as _project
from composegen.output import emit_json, err, out

edge_app = typer.Typer(
    no_args_is_help=True,
    help="The edge: TLS, the route allowlist, per-client keys, aliases (docs/edge.md).\n\nExample: composegen edge up",
)
keys_app = typer.Typer(
    no_args_is_help=True,
    help="Per-client keys of the edge (shown once, stored hashed).\n\nExample: composegen keys add alice",
)
app.add_typer(edge_app, name="edge")
app.add_typer(keys_app, name="keys")


@edge_app.command("up")
def edge_up():
    """Start (or update) the edge from out/edge/; a changed Caddyfile is reloaded gracefully.

    Example: composegen edge up
    """
    from composegen.edge import service

    edge = service.up(_project())
    out(f"edge {edge.config.name}: up at {edge.url} (tls {edge.config.tls.mode}), stacks: {', '.join(edge.stacks)}")


@edge_app.command("down")
def edge_down():
    """Stop and remove the edge's containers (the stacks behind it keep running, unreachable).

    Example: composegen edge down
    """
    from composegen.edge import service

    edge = service.down(_project())
    out(f"edge {edge.config.name}: down")


@edge_app.command("ca")
def edge_ca():
    """Print the root certificate of the edge's internal CA (tls: internal) for clients to trust.

    Example: composegen edge ca > edge-root.crt
    """
    from composegen.edge import service

    out(service.root_certificate(_project()).rstrip("\n"))


@keys_app.command("add")
def keys_add(
    name: str = typer.Argument(..., help="The client's name (shown in the access log)."),
    expires: str | None = typer.Option(None, "--expires", help="YYYY-MM-DD (00:00 UTC) or an ISO 8601 time."),
):
    """Make a key for a new client and print it — once; only its hash is kept.

    Example: composegen keys add alice --expires 2027-01-31
    """
    from composegen.edge import keys

    key = keys.add(_project(), name, expires)
    err(f"client {name}: key made; it is shown only now — store it, it cannot be shown again")
    out(key)


@keys_app.command("rotate")
def keys_rotate(name: str = typer.Argument(..., help="An existing client.")):
    """A new key for a client (printed once); the old key stops working at once.

    Example: composegen keys rotate alice
    """
    from composegen.edge import keys

    key = keys.rotate(_project(), name)
    err(f"client {name}: new key; the old one no longer works — the new one is shown only now")
    out(key)


@keys_app.command("revoke")
def keys_revoke(name: str = typer.Argument(..., help="An existing client.")):
    """Revoke a client's key at once (the record stays, marked revoked).

    Example: composegen keys revoke alice
    """
    from composegen.edge import keys

    keys.revoke(_project(), name)
    out(f"client {name}: revoked")


@keys_app.command("list")
def keys_list(json_: bool = JsonOpt):
    """The clients: name, state (active, expired, revoked), created, expiry — never a key.

    Example: composegen keys list
    """
    from composegen.edge import keys
    from composegen.edge.reports import ClientsReport, client_rows

    rows = client_rows(keys.listing(_project()))
    if json_:
        return emit_json(ClientsReport(clients=rows).to_json())
    if not rows:
        return out("no clients (add one: composegen keys add NAME)")
    for row in rows:
        out(f"{row.name:<24} {row.state:<8} created {row.created}  expires {row.expires or 'never'}")
