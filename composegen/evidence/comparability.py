"""Whether two runs can be compared (issue 50 item 4, in part): `not comparable` with each reason when
one ran the EMULATED vLLM and the other a real engine, their image digests or model revisions differ,
more than the one variable under test changed functionally, or a check failed on either (the engine
did not report ready, a gate failed). None: comparable. `compare` and a campaign's record print it
beside the figures, with each run's context (`context_notes`: the client host's CPU governor and load,
how the engine started, the server-histogram check), which informs but does not decide."""

from __future__ import annotations

from composegen.bench.spec import describe
from composegen.evidence.reports.bundle import LoadedRun


def _checked(doc: LoadedRun) -> bool:
    return bool(doc.startup.ready) and all(g.passed for g in (doc.gates.gates if doc.gates else []))


def label(a: LoadedRun, b: LoadedRun, functional: int) -> str | None:
    """A and B: the two runs; FUNCTIONAL: how many functional settings differ between them."""
    why = [
        reason
        for reason, differs in (
            ("one ran the EMULATED vLLM, the other a real engine", a.emulated != b.emulated),
            ("their image digests differ", a.image_digest != b.image_digest),
            ("their model revisions differ", a.model_revision != b.model_revision),
            (f"{functional} functional settings differ, not one", functional > 1),
            ("a check failed (not ready, or a failed gate)", not (_checked(a) and _checked(b))),
        )
        if differs
    ]
    return "not comparable: " + "; ".join(why) if why else None


def context_notes(a: LoadedRun, b: LoadedRun) -> list[str]:
    """One note per run on its context (older bundles have none)."""
    runs = (("a", a), ("b", b))
    return [
        f"{k} ({d.profile.name}): {describe(d.comparability)}" for k, d in runs if d.comparability
    ]
