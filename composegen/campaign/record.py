"""campaign.md: the decision record of an A/B campaign, in the seed's shape (r33 batch-token A/B),
written from the sanitized comparison (comparison.py) so it carries nothing comparison.json may not.

Sections: the head (date, evidence kind, decision), Outcome (sentences computed from the figures),
Controlled configuration, Results (the compare table), Bracket, What this proves and what it does
not (generated from what was measured), Decision, Next arm, Evidence (every figure's raw file by
SHA-256).
"""

from __future__ import annotations

from typing import cast

from composegen.campaign.bracket import sentence
from composegen.campaign.reports import CampaignState, ComparisonReport
from composegen.evidence import compare
from composegen.evidence.reports.compare import CompareRow
from composegen.units import format_gib

STARTUP_METRICS = {
    "min_rank_kv_gib",
    "kv_cache_tokens",
    "max_concurrency",
    "peak_activation_gib",
    "weights_gib",
}
SOURCE = {"gates": "gates.json"}

# what a record says before the figures when the emulator made them
EMULATED_NOTE = [
    "> **EMULATED vLLM**: every figure below comes from the emulator, not a GPU or a model.",
    "",
]


def _pair(row: CompareRow | None) -> tuple[float, float] | None:
    """The row's two figures when both arms reported a number."""
    a, b = (row.a, row.b) if row is not None else (None, None)
    if any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in (a, b)):
        return None
    return cast(float, a), cast(float, b)


def _num(v: object) -> str:
    return f"{v:,}" if isinstance(v, int) else (format_gib(v) if isinstance(v, float) else str(v))


def _flag_name(path: str) -> str:
    return path.rsplit(".", 1)[-1] if ".--" in path else path


def _cause(doc: ComparisonReport) -> str:
    diffs = doc.differences.functional
    if len(diffs) == 1:
        d = diffs[0]
        return (
            f"Changing {_flag_name(d.path)} from {_num(d.before)} to {_num(d.after)} "
            f"on the otherwise matched {doc.control} control"
        )
    if diffs:
        return f"The {len(diffs)} functional changes from {doc.control} to {doc.candidate}"
    return f"With no functional configuration change from {doc.control} to {doc.candidate}, the candidate"


def outcome(doc: ComparisonReport) -> list[str]:
    rows, cause, parts = {r.metric: r for r in doc.rows}, _cause(doc), []
    act, kv = rows.get("peak_activation_gib"), rows.get("min_rank_kv_gib")
    for row, what in (
        (act, "profiled peak activation memory"),
        (kv, "the minimum-rank GPU KV allocation"),
    ):
        if pair := _pair(row):
            a, b = pair
            verb = "increased" if b > a else "reduced" if b < a else "left"
            per = " per TP rank" if row is act else ""
            parts.append(f"{verb} {what} from {format_gib(a)} to {format_gib(b)}{per}")
    first = (
        f"{cause} {' and '.join(parts)}."
        if parts
        else f"{cause}: the engine reported no memory figures."
    )
    out = [f"{first} {sentence(doc.bracket, doc.control)}", ""]
    if said := gates_sentence(doc):
        out += [said, ""]
    tokens, conc = rows.get("kv_cache_tokens"), rows.get("max_concurrency")
    if counted := _pair(tokens):
        a, b = counted
        verb = "increased" if b > a else "decreased" if b < a else "stayed"
        text = f"The engine-reported KV capacity {verb} from {a:,} to {b:,} tokens"
        if conc and (stated := _pair(conc)):
            at = conc.label.split(" at ")[-1]
            text += f" and its stated concurrency at {at} from {stated[0]:.2f}x to {stated[1]:.2f}x"
        out.append(text + ".")
    cap = doc.unexplained_capacity_change
    if cap.flag:
        out[-1] += (
            " That token-count change is not explained by the KV byte allocation: "
            f"KV bytes {cap.kv_bytes_pct:+.3f}% against KV tokens {cap.kv_tokens_pct:+.3f}%. "
            "Cache geometry or engine accounting remains unresolved; the mismatch is kept explicitly."
        )
    elif cap.flag is False and out[-1]:
        out[-1] += (
            f" The token change follows the KV byte change (bytes {cap.kv_bytes_pct:+.3f}%, tokens "
            f"{cap.kv_tokens_pct:+.3f}%): no unexplained capacity change."
        )
    return out


def gates_sentence(doc: ComparisonReport) -> str:
    """The functional gates in one sentence: each arm's failed gates by name ("" when none ran)."""
    ran = [c for c in doc.criteria if c.name.startswith("gate:")]
    failed: dict[str, list[str]] = {}
    for c in ran:
        if not c.passed:
            failed.setdefault(c.arm, []).append(c.name[len("gate:") :])
    if not ran or not failed:
        return "Every functional gate passed on every arm." if ran else ""
    named = "; ".join(f"{arm} failed {', '.join(names)}" for arm, names in failed.items())
    verdict = "is not promoted on this evidence" if "candidate" in failed else "passed every gate"
    return f"Functional gates FAILED: {named}; the candidate {verdict}."


def configuration(doc: ComparisonReport) -> list[str]:
    m, arm = doc.model, (doc.arms[0].figures if doc.arms else {})
    digest = m.image_digest or (
        "none (a local build: the emulator image)"
        if doc.emulated
        else "unknown (no registry digest recorded)"
    )
    lines = [
        f"Both arms used model {m.id or 'unknown'} at revision {m.revision or 'unknown'}, image digest "
        f"{digest}, vLLM {arm.get('vllm_version') or 'unknown'}, {_num(arm.get('max_model_len'))} configured context."
    ]
    diffs = doc.differences.functional
    if len(diffs) == 1:
        lines.append(
            f"Only {_flag_name(diffs[0].path)} changed functionally; it was the only functional change."
        )
    elif diffs:
        changed = ", ".join(
            f"{_flag_name(d.path)} ({_num(d.before)} -> {_num(d.after)})" for d in diffs
        )
        lines.append(
            f"{len(diffs)} settings changed functionally: {changed}. The A/B does not isolate one variable."
        )
    else:
        lines.append("Nothing changed functionally between the arms.")
    named = identity_names(doc.differences.identity)
    if named:
        lines.append(
            f"{_join(named, ' and ').capitalize()} changed solely to preserve evidence identity."
        )
    return lines


IDENTITY_NAMES = (
    ("ports", "port"),
    ("served-model-name", "served name"),
    ("container_name", "container name"),
    ("hostname", "host name"),
)


def identity_names(paths: list[str]) -> list[str]:
    """An identity-only path in words; composegen's own labels and the project name go unsaid."""
    found = []
    for path in paths:
        name = next((word for key, word in IDENTITY_NAMES if key in path), None)
        if name is None and ".labels." not in path and path != "name":
            name = path
        if name and name not in found:
            found.append(name)
    return found


def limits(doc: ComparisonReport, state: CampaignState) -> tuple[list[str], list[str]]:
    """(what this proves, what it does not): from what was actually measured."""
    rows, opts = {r.metric: r for r in doc.rows}, state.options
    proves, not_proven = [], []
    if doc.emulated:
        proves.append(
            "These arms ran the EMULATED vLLM (a labelled test double): the figures exercise composegen and this "
            "campaign's logic, not a GPU, an engine or a model."
        )
    gates = rows.get("gates")
    if not (gates and gates.a and gates.b):
        gate_text = "with no functional gates run on both arms"
        not_proven.append("functional equivalence (no gates on both arms)")
    elif all(_full(str(v)) for v in (gates.a, gates.b)):
        gate_text = f"without breaking the bounded functional gates ({gates.b} on the candidate)"
    else:
        gate_text = (
            f"but the functional gates did not all pass (control {gates.a}, candidate {gates.b})"
        )
        not_proven.append("that the candidate keeps the control's functional behaviour")
    proves.append(
        f"This shows how the candidate's configuration changes the engine-reported memory split against the "
        f"{doc.control} control on this topology, {gate_text}."
    )
    if doc.bracket and doc.bracket.passed:
        proves.append(
            "It also establishes that the control result is reproducible under the current runtime."
        )
    elif doc.bracket:
        not_proven.append("a reproducible baseline (the bracketed replay drifted)")
    else:
        not_proven.append("a reproducible baseline (no bracketed replay was run)")
    targets = sorted(opts.ladder)
    max_len = max((a.figures.get("max_model_len") or 0 for a in doc.arms), default=0)
    largest = rows.get("largest_prompt_tokens")
    sizes = [v for v in ((largest.a, largest.b) if largest else ()) if isinstance(v, int)]
    if targets and sizes:
        not_proven.append(
            f"a request above {min(sizes):,} tokens (the largest actual prompt both arms completed)"
        )
    if targets:
        not_proven.append(
            "a performance ranking (one request per ladder target supports a capacity comparison, not a "
            "performance ranking)"
        )
    else:
        not_proven.append("any long-context request (no context ladder was run)")
    if max_len:
        not_proven.append(f"startup at a context above {max_len:,} tokens")
    if opts.bench_rates:
        rates = ", ".join(f"{rate:g}" for rate in opts.bench_rates)
        not_proven.append(
            f"performance at other loads than {rates} requests/s (open loop), other request sizes "
            f"than {opts.bench_input_tokens}/{opts.bench_output_tokens} tokens, another model or "
            "machine (the frontier compares these arms at these loads only)"
        )
    elif max(opts.bench, default=0) <= 1:
        not_proven.append("concurrency beyond one active request")
    else:
        not_proven.append(f"concurrency beyond {max(opts.bench)} active requests")
    not_proven.append("broad task-quality equivalence")
    cap = doc.unexplained_capacity_change
    if cap.flag:
        not_proven.append("a causal explanation for the reported KV-token change")
        tail = (
            f" The mismatch between {cap.kv_bytes_pct:+.3f}% KV bytes and {cap.kv_tokens_pct:+.3f}% reported "
            "tokens is retained explicitly rather than normalized away."
        )
    else:
        tail = ""
    does_not = "It does not prove " + _join(not_proven) + "." + tail
    return proves, [does_not]


def _full(score: str) -> bool:
    passed, _, total = score.partition("/")
    return passed == total


def _join(items: list[str], last: str = ", or ") -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + last + items[-1]


def _decision_lines(doc: ComparisonReport) -> list[str]:
    d = doc.decision
    if d.decision == "undecided":
        return [
            f"undecided. The operator records it: `composegen campaign decide {doc.campaign} "
            '--promote|--no-promotion|--fallback --why "…"`.'
        ]
    target = f" ({d.profile})" if d.profile else ""
    said = f"**{d.decision}**{target}, decided {d.decided_at}: {d.why}"
    return [said + (f" Despite failed gates: {d.despite_gates}" if d.despite_gates else "")]


def _trace(doc: ComparisonReport) -> list[str]:
    """Each figure of Results and Bracket: the raw file it came from, by SHA-256 on each arm."""
    sha = {(r.arm, r.file): r.sha256 for r in doc.raw}
    arms = [a.arm for a in doc.arms]
    lines = [
        "| Figure | Raw file | " + " | ".join(f"{a} SHA-256" for a in arms) + " |",
        "|---|---|" + "---|" * len(arms),
    ]
    for row in doc.rows:
        metric = row.metric
        file = "startup.json" if metric in STARTUP_METRICS else SOURCE.get(metric, "ladder.json")
        if all((a, file) not in sha for a in arms):
            continue
        cells = " | ".join(
            f"`{sha[(a, file)]}`" if (a, file) in sha else "not measured" for a in arms
        )
        lines.append(f"| {row.label} | {file} | {cells} |")
    lines.append("")
    lines.append(
        "startup.json is parsed from startup.log (its hashes: "
        + ", ".join(f"{a} `{sha[(a, 'startup.log')]}`" for a in arms if (a, "startup.log") in sha)
        + ")."
    )
    return lines


def close(state: CampaignState) -> str:
    """One stack at a time, each taken down; what /dev/shm held after each down."""
    counts = [(a.key, a.shm_reclaimable) for a in state.arms]
    text = "Every arm ran alone on the profile's GPUs (exclusive mode) and was taken down before the next. "
    if any(a.path == "wake" for a in state.arms):
        paths = ", ".join(f"{a.key} {a.path or 'not run'}" for a in state.arms)
        text = (
            "Every arm ran alone on the profile's GPUs (exclusive mode); on standby stacks the "
            "control was kept asleep while the candidate ran and woken for the bracket, so each "
            f"profile had one cold start (path per arm: {paths}). "
        )
    if state.residency is not None:
        kept = "resident" if state.residency.resident else "not resident"
        text += f"At the end both engines were {kept}: {state.residency.reason}. "
    if all(c is None for _, c in counts):
        return (
            text
            + "Each container had a private /dev/shm (ipc not host), removed with it: nothing to reclaim."
        )
    found = ", ".join(f"{k} {c if c is not None else 'not checked'}" for k, c in counts)
    total = sum(c or 0 for _, c in counts)
    verdict = (
        "zero reclaimable files"
        if total == 0
        else f"leftover files ({found}): `composegen shm reclaim`"
    )
    return text + f"Shared-memory inspection after each down found {verdict}."


def _bench(doc: ComparisonReport) -> list[str]:
    """The arms' load benchmark side by side: per level, control (a) and candidate (b)."""
    if doc.bench is None:
        return []
    source = "EMULATED vLLM" if doc.emulated else "measured"
    said = (
        f"a = {doc.control} control, b = {doc.candidate} candidate, at the same loads ({source})."
    )
    return ["## Load benchmark", "", said, *compare.bench_markdown(doc.bench), ""]


def render(doc: ComparisonReport, state: CampaignState, next_arm: list[str]) -> str:
    """DOC: the sanitized comparison (comparison.build), as comparison.json holds it."""
    sources = {a.source for a in doc.arms}
    evidence = (
        "EMULATED (composegen's vLLM test double)"
        if doc.emulated
        else "measured on a real engine"
        if sources == {"stack"}
        else "read from recorded startup logs"
    )
    lines = [
        f"# Campaign {doc.campaign}: {doc.control} (control) vs {doc.candidate} (candidate)",
        "",
        f"Date: {state.created_at[:10]}",
        f"Evidence: {evidence}; functional gates, context ladder and engine-reported capacity, one stack at a time",
        f"Decision: {doc.decision.decision}",
        "",
    ]
    lines += EMULATED_NOTE if doc.emulated else []
    lines += ["## Outcome", "", *outcome(doc), ""]
    lines += ["## Controlled configuration", "", " ".join(configuration(doc)), ""]
    table = compare.markdown_table(f"{doc.control} control", f"{doc.candidate} candidate", doc.rows)
    said = [f"**{doc.comparability}**", ""] if doc.comparability else []
    lines += ["## Results", "", *said, *table, ""]
    lines += _bench(doc)
    if doc.bracket:
        lines += [
            "## Bracket",
            "",
            "| Figure | first control | replayed control | max rel. diff | |",
            "|---|---|---|---|---|",
        ]
        for f in doc.bracket.figures:
            mark = "pass" if f.passed else "DRIFT"
            lines.append(f"| {f.label} | {f.first} | {f.replay} | {f.max_rel_diff} | {mark} |")
        lines.append("")
    proves, does_not = limits(doc, state)
    lines += ["## What this proves and what it does not", "", " ".join(proves), "", *does_not, ""]
    lines += ["## Decision", "", *_decision_lines(doc), ""]
    lines += ["## Next arm", "", *next_arm, ""]
    lines += ["## Campaign close", "", close(state), ""]
    lines += ["## Evidence", "", *_trace(doc), ""]
    lines += [
        "The sanitized machine-readable comparison is comparison.json. Private raw artifacts are represented "
        "there by SHA-256 only because the full operational evidence contains private topology details."
    ]
    return "\n".join(lines) + "\n"


def paragraphs(text: str, title: str) -> list[str]:
    """The paragraphs of campaign.md's section TITLE (`Outcome`): what a finished run prints, with
    the decide command and the record's path, instead of the whole record."""
    parts = text.split(f"\n## {title}\n", 1)
    section = parts[1].split("\n## ", 1)[0] if len(parts) == 2 else ""
    return [p.strip().replace("\n", " ") for p in section.split("\n\n") if p.strip()]
