"""What `composegen render` does and prints: the typer command (render_command.py) and the plain
`render --check` that cli/fastpath.py answers without typer both run `render`, so the check has one
code path whichever way it was asked for. No docker import."""

from __future__ import annotations

from composegen import ledger, rendercache
from composegen.edge import config
from composegen.edge.render import render_edge
from composegen.errors import BadInput, CheckFailed
from composegen.k8s import output as k8s
from composegen.output import Output
from composegen.profiles import reports
from composegen.project import Project


def _refuse_standby_outside_the_edge(project: Project, standby: list[str]) -> None:
    """Sleep mode opens vLLM's dev routes (/sleep, /wake_up, /collective_rpc, /reset_*) on the
    engine's own port; only the edge takes a stack's published port away
    (out/edge/stacks/NAME.yaml)."""
    if not standby:
        return
    fronted = config.load(project).stacks if config.configured(project) else {}
    outside = [name for name in standby if name not in fronted]
    if outside:
        raise BadInput(
            f"profiles/{outside[0]}.yaml: standby: {', '.join(outside)} is not behind the edge; its dev routes "
            "(/sleep, /collective_rpc, /reset_*) would answer on its published port",
            hint="list it in edge.yaml's stacks (composegen docs edge), or drop `standby`",
        )


def _refuse_k8s_behind_the_edge(project: Project, k8s_profiles: list[str]) -> None:
    """A stack the edge guards gets no Kubernetes manifests: they would hold a plain Service
    straight to vLLM (no key, no route allowlist), and the edge itself has no Kubernetes form
    yet."""
    if not k8s_profiles or not config.configured(project):
        return
    guarded = [name for name in k8s_profiles if name in config.load(project).stacks]
    if guarded:
        raise BadInput(
            f"edge.yaml: {', '.join(guarded)} sits behind the edge: `--target k8s` cannot render the edge (its "
            "proxy, gatekeeper and NetworkPolicy), and a plain Service would reach vLLM with no key or allowlist",
            hint="render the k8s target for profiles the edge does not list, or take the profile out of edge.yaml",
        )


def render(
    project: Project, names: list[str] | None, *, check: bool, target: str | None, json_: bool
) -> None:
    """Render NAMES (all when None) into out/, or with CHECK print the drift and fail on it."""
    if target is not None and target not in k8s.TARGETS:
        raise BadInput(f"--target: {target!r} is not one of {', '.join(k8s.TARGETS)}")
    # what cli/fastpath.py answers
    plain_check = check and not names and not json_ and target is None
    # hashed before rendering
    inputs = rendercache.fingerprint(project.root) if plain_check else None
    rendered, built, swept, standby = k8s.render_targets(project, names, target)
    _refuse_k8s_behind_the_edge(project, [m.profile for m in built])
    _refuse_standby_outside_the_edge(project, standby)
    # out/edge/ when the project has an edge.yaml (docs/edge.md): part of the compose target
    if not names and "compose" in swept and config.configured(project):
        rendered.update(render_edge(config.load(project)))
    if check:
        return _check(project, rendered, names, swept, json_, inputs)
    _write(project, rendered, names, swept, built, json_)


def _check(
    project: Project,
    rendered: dict[str, str],
    names: list[str] | None,
    swept: tuple[str, ...],
    json_: bool,
    inputs: str | None,
) -> None:
    """`render --check`: print the drift (or the fresh line) and fail on drift."""
    show = Output(json_)
    drift = ledger.check(project, rendered, all_profiles=not names, targets=swept)
    drifted = [reports.Drift.model_validate({"path": d.path, "reason": d.reason}) for d in drift]
    show.report(reports.RenderCheckReport(fresh=not drift, drift=drifted))
    for d in drift:
        show.say(d.diff)
    if drift:
        raise CheckFailed(
            f"{len(drift)} file(s) in out/ are stale or orphaned", hint="run `composegen render`"
        )
    line = f"out/ is fresh ({len(rendered)} files)"
    show.say(line)
    rendercache.remember(project.root, inputs, line)  # the plain check's (else inputs is None)


def _write(
    project: Project,
    rendered: dict[str, str],
    names: list[str] | None,
    swept: tuple[str, ...],
    built: list[k8s.Manifests],
    json_: bool,
) -> None:
    """Write what changed, sweep the orphans, print what was done."""
    written = ledger.write(project, rendered)
    removed = ledger.remove_orphans(project, rendered, swept) if not names else []
    unchanged = len(rendered) - len(written)
    report = reports.RenderReport(
        written=written, removed=removed, unchanged=unchanged, k8s=k8s.report(built)
    )
    Output(json_).report(report, lambda: _written_text(report, built))


def _written_text(report: reports.RenderReport, built: list[k8s.Manifests]) -> str:
    lines = [f"wrote {path}" for path in report.written]
    lines += [f"removed {path} (no profile renders it)" for path in report.removed]
    for m in (m for m in built if f"out/{m.profile}/k8s/{m.workload_file}" in report.written):
        lines += [
            f"{m.profile}: k8s security: {note.k8s} (compose: {note.setting}: {note.value})"
            for note in m.notes.security
        ]
        if m.notes.unmapped:
            unmapped = [n.setting for n in m.notes.unmapped]
            none = f"{len(unmapped)} compose setting(s) have no equivalent"
            lines.append(f"{m.profile}: k8s: {none}: {', '.join(unmapped)}")
    lines.append(
        f"{len(report.written)} written, {len(report.removed)} removed, {report.unchanged} unchanged"
    )
    return "\n".join(lines)
