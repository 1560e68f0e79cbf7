"""campaign.md of a qualification campaign: which arm qualified, each arm's criteria, why a failed
arm failed (by criterion, from the sanitized record), the decision and the evidence by SHA-256."""

from __future__ import annotations

from composegen.campaign.record import EMULATED_NOTE
from composegen.campaign.reports import CampaignState, QualificationReport, QualifiedArm


def _fmt(v: object) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:,.0f}" if v >= 1000 else f"{v:.3f}"
    return "unknown" if v is None else str(v)


def _arm_sentence(a: QualifiedArm) -> str:
    if a.qualified:
        probe = a.probe or {}
        pool, ctx = _fmt(a.kv_cache_tokens), _fmt(a.max_model_len)
        text = f"{a.profile} qualified: reported KV pool {pool} tokens for a {ctx}-token context"
        if probe:
            text += (
                f"; an actual prompt of {_fmt(probe.get('prompt_tokens'))} API-reported tokens "
                f"(TTFT {_fmt(probe.get('ttft_s'))} s, prefill {_fmt(probe.get('prefill_tok_s'))} tok/s, "
                f"decode {_fmt(probe.get('decode_tok_s'))} tok/s)"
            )
        return text + "; post-probe gates passed."
    failed = [c for c in a.criteria if not c.passed]
    parts = [f"{c.name} ({_fmt(c.measured)}, needed {_fmt(c.threshold)})" for c in failed]
    text = f"{a.profile} did not qualify: {', '.join(parts)}."
    if not a.started:
        estimate = a.kv_pool_estimate
        text += " The engine refused to start" + (
            f": its KV pool holds {estimate:,} tokens, below the {_fmt(a.max_model_len)}-token context."
            if estimate
            else "."
        )
    return text


def render(doc: QualificationReport, st: CampaignState) -> str:
    arms = doc.arms
    names = " → ".join(a.profile for a in st.arms)
    lines = [f"# Qualification campaign {doc.campaign}: {names}", "", f"Date: {st.created_at[:10]}"]
    ev = "EMULATED (composegen's vLLM test double)" if doc.emulated else "measured on a real engine"
    lines.append(f"Evidence: {ev}")
    lines += [f"Decision: {doc.decision.decision}", ""]
    lines += EMULATED_NOTE if doc.emulated else []
    verdict = (
        f"{doc.qualified_profile} ({doc.qualified_arm} arm) qualified."
        if doc.qualified_arm
        else "No arm qualified."
    )
    lines += ["## Outcome", "", verdict, "", *[_arm_sentence(a) for a in arms], ""]
    for arm in st.arms:
        if arm.status == "skipped":
            lines += [f"The {arm.key} arm ({arm.profile}) was not needed and did not run.", ""]
    for a in arms:
        lines += [
            f"## {a.arm}: {a.profile}",
            "",
            "| Criterion | Measured | Needed | |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| {c.name} | {_fmt(c.measured)} | {_fmt(c.threshold)} | {'pass' if c.passed else 'FAIL'} |"
            for c in a.criteria
        ]
        lines.append("")
    d = doc.decision
    lines += ["## Decision", ""]
    if d.decision == "undecided":
        lines.append(
            f'undecided. `composegen campaign decide {doc.campaign} --promote|--no-promotion|--fallback --why "…"`.'
        )
    else:
        lines.append(
            f"**{d.decision}** ({d.profile or 'no profile'}), decided {d.decided_at}: {d.why}"
        )
    lines += ["", "## Evidence", "", "| Arm | Raw file | SHA-256 |", "|---|---|---|"]
    lines += [f"| {r.arm} | {r.file} | `{r.sha256}` |" for r in doc.raw]
    lines += [
        "",
        "The sanitized machine-readable record is qualification.json. Private raw artifacts are represented there "
        "by SHA-256 only because the full operational evidence contains private topology details.",
    ]
    return "\n".join(lines) + "\n"
