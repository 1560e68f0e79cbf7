"""The functional gates against a running stack, as a switch, a recovery or `up --standby` asks
for them: without the bench and ladder modules capture.py brings (a switch's clients wait for the
CLI's imports: docs/standby.md). capture.py runs stack_gates for its bundles.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from composegen.errors import CheckFailed
from composegen.evidence import gates
from composegen.evidence.gate_client import openai_http
from composegen.evidence.reports.bundle import LoadedRun
from composegen.evidence.reports.gate import GateResult
from composegen.profiles.resolved import Resolved
from composegen.stack import driver


def stack_gates(
    r: Resolved,
    *,
    only: str | Sequence[str] | None = None,
    tools: int = 20,
    on_step: Callable[[str], None] | None = None,
    reference: list[str] | None = None,
) -> GateResult:
    """The functional gates against R's running stack, at its endpoint as seen from here;
    REFERENCE: the equivalence gate's (gates.run_gates)."""
    ep = driver.endpoint(r)
    return gates.run_gates(
        ep.base_url,
        r.profile.model.served_name,
        api_key=ep.api_key,
        tools=tools,
        only=only,
        on_step=on_step,
        reference=reference,
    )


def preload_gates() -> None:
    """Import the gates' client libraries now (openai and its httpx: ~0.2-0.3 s of CPU on a loaded
    machine), e.g. on a thread while a standby switch waits on its engines, so the gates after the
    wake do not pay for it."""
    openai_http()


def require_gates(r: Resolved, only: list[str] | None) -> None:
    """ONLY (default smoke) must pass on R's running stack, or CheckFailed names those that did
    not."""
    failed = [g.name for g in stack_gates(r, only=only or ["smoke"]).gates if not g.passed]
    if failed:
        raise CheckFailed(f"{r.name}: gates failed: {', '.join(failed)}")


def record_failed_gates(record: Mapping[str, object], profile: str) -> list[str]:
    """The gates that failed on any arm that ran PROFILE, read from a campaign record
    (comparison.json as JSON: its `arms` name the profiles, its `criteria` the `gate:NAME` rows)."""
    arms, rows = record.get("arms"), record.get("criteria")
    ours = [a for a in arms if isinstance(a, dict)] if isinstance(arms, list) else []
    ran = {a.get("arm") for a in ours if a.get("profile") == profile}
    failed = [
        str(c.get("name"))[len("gate:") :]
        for c in (rows if isinstance(rows, list) else [])
        if isinstance(c, dict)
        and c.get("arm") in ran
        and str(c.get("name")).startswith("gate:")
        and c.get("passed") is not True
    ]
    return list(dict.fromkeys(failed))


def refuse_failed_gates(what: str, failed: list[str], despite: str | None) -> None:
    """CheckFailed naming FAILED (the gates WHAT failed) unless the operator said why it goes on
    DESPITE them (`--despite-gates "why"`, recorded with the decision)."""
    if failed and not (despite or "").strip():
        raise CheckFailed(
            f"{what} failed gates: {', '.join(failed)}",
            hint='a candidate that fails its gates is not promoted; `--despite-gates "why"` records an exception',
        )


def reference_answers(control: LoadedRun | None) -> list[str]:
    """The equivalence gate's answers in a control arm's gates; [] when it has none."""
    rows = control.gates.gates if control and control.gates else []
    details = next((getattr(g, "details", None) for g in rows if g.name == "equivalence"), None)
    return [str(a) for a in details.get("answers") or []] if isinstance(details, dict) else []
