"""Commands on profiles and rendered files. None of them imports docker libraries (startup stays fast)."""

from __future__ import annotations

import typer

from composegen.cli.app import JsonOpt, ProfileArg, app, complete_profile
from composegen.cli.app import project as _project
from composegen.errors import CheckFailed
from composegen.output import emit_json, out


@app.command("list")
def list_(json_: bool = JsonOpt):
    """List the profiles and what each extends.

    Example: composegen list --json
    """
    from composegen.errors import BadInput
    from composegen.output import err, table
    from composegen.profiles import resolve as profile

    project = _project()
    rows = []
    for name in project.profile_names():  # one bad profile must not hide the others
        try:
            r = profile.load(project, name)
            rows.append(
                {
                    "name": name,
                    "extends": r.chain[1] if len(r.chain) > 1 else None,
                    "description": r.profile.description,
                    "hash": r.hash,
                    "error": None,
                }
            )
        except BadInput as exc:
            rows.append({"name": name, "extends": None, "description": "", "hash": None, "error": exc.message})
    if json_:
        from composegen.profiles import reports

        emit_json(reports.ListReport.model_validate({"profiles": rows}).to_json())
    else:
        out(
            table(
                [[row["name"], row["extends"] or "-", row["description"] or "INVALID (see below)"] for row in rows],
                ["NAME", "EXTENDS", "DESCRIPTION"],
            )
        )
    bad = [row for row in rows if row["error"]]
    for row in bad:
        err(row["error"])
    if bad:
        raise BadInput(f"{len(bad)} of {len(rows)} profiles are invalid")


@app.command()
def validate(
    names: list[str] | None = typer.Argument(
        None, help="Profiles to check (all by default).", autocompletion=complete_profile
    ),
    strict: bool = typer.Option(False, "--strict", help="Also fail on warnings such as an unpinned image."),
    json_: bool = JsonOpt,
):
    """Check profiles: schema, flags against the vLLM catalog, cross-field rules.

    Example: composegen validate --strict r33
    """
    from composegen.profiles import resolve as profile
    from composegen.profiles import rules

    resolved = profile.load_all(_project(), names)
    shared = rules.across_profiles(resolved)
    report = {
        "profiles": [
            {"name": r.name, "hash": r.hash, "warnings": r.warnings, "pinned": r.profile.pinned} for r in resolved
        ],
        "warnings": shared,
    }
    if json_:
        from composegen.profiles import reports

        emit_json(reports.ValidateReport.model_validate(report).to_json())
    else:
        for r in resolved:  # with --strict a profile with warnings fails: never `ok` first
            out(f"{'warnings present (--strict)' if strict and r.warnings else 'ok'}  {r.name}")
            for w in r.warnings:
                out(f"    warning: {w}")
        for w in shared:
            out(f"warning: {w}")
    if strict:
        unpinned = [r.name for r in resolved if not r.profile.pinned]
        if unpinned:
            raise CheckFailed(f"--strict: unpinned image in {', '.join(unpinned)}")
        if shared or any(r.warnings for r in resolved):
            raise CheckFailed("--strict: warnings present")


def _edge_files(project) -> dict[str, str]:
    """out/edge/ when the project has an edge.yaml (docs/edge.md)."""
    from composegen.edge import config
    from composegen.edge.render import render_edge

    return render_edge(config.load(project)) if config.configured(project) else {}


@app.command()
def render(
    names: list[str] | None = typer.Argument(
        None, help="Profiles to render (all by default).", autocompletion=complete_profile
    ),
    check: bool = typer.Option(False, "--check", help="Write nothing; exit 1 with a diff when out/ is stale."),
    target: str | None = typer.Option(
        None,
        "--target",
        help="compose, k8s (out/NAME/k8s/: docs/kubernetes.md) or all; default: compose, plus k8s where "
        "out/NAME/k8s/ exists.",
    ),
    json_: bool = JsonOpt,
):
    """Render out/<name>/compose.yaml from profiles/<name>.yaml (all: also remove generated files of
    profiles that no longer exist).

    Example: composegen render --check
    """
    from composegen import render as rendering
    from composegen import rendercache
    from composegen.errors import BadInput
    from composegen.k8s import output as k8s

    if target is not None and target not in k8s.TARGETS:
        raise BadInput(f"--target: {target!r} is not one of {', '.join(k8s.TARGETS)}")
    project = _project()
    plain_check = check and not names and not json_ and target is None  # what cli/fastpath.py answers
    inputs = rendercache.fingerprint(project.root) if plain_check else None  # hashed before rendering
    rendered, built, swept = k8s.render_targets(project, names, target)
    if not names and "compose" in swept:  # the edge belongs to the compose target
        rendered.update(_edge_files(project))
    if check:
        drift = rendering.check(project, rendered, all_profiles=not names, targets=swept)
        if json_:
            from composegen.profiles import reports

            drifted = [{"path": d.path, "reason": d.reason} for d in drift]
            emit_json(reports.RenderCheckReport.model_validate({"fresh": not drift, "drift": drifted}).to_json())
        else:
            for d in drift:
                out(d.diff)
        if drift:
            raise CheckFailed(f"{len(drift)} file(s) in out/ are stale or orphaned", hint="run `composegen render`")
        if not json_:
            line = f"out/ is fresh ({len(rendered)} files)"
            out(line)
            rendercache.remember(project.root, inputs, line)
        return
    written = rendering.write(project, rendered)
    removed = rendering.remove_orphans(project, rendered, swept) if not names else []
    if json_:
        from composegen.profiles import reports

        unchanged = len(rendered) - len(written)
        report = reports.RenderReport(written=written, removed=removed, unchanged=unchanged, k8s=k8s.report(built))
        return emit_json(report.to_json())
    for path in written:
        out(f"wrote {path}")
    for path in removed:
        out(f"removed {path} (no profile renders it)")
    for m in (m for m in built if f"out/{m.profile}/k8s/{m.workload_file}" in written):
        for note in m.notes.security:
            out(f"{m.profile}: k8s security: {note.k8s} (compose: {note.setting}: {note.value})")
        if m.notes.unmapped:
            out(f"{m.profile}: k8s: {len(m.notes.unmapped)} compose setting(s) have no equivalent: "
                + ", ".join(n.setting for n in m.notes.unmapped))  # fmt: skip
    out(f"{len(written)} written, {len(removed)} removed, {len(rendered) - len(written)} unchanged")


@app.command()
def show(name: str = ProfileArg, json_: bool = JsonOpt):
    """The resolved profile and the container argv.

    Example: composegen show r33
    """
    from composegen.profiles import resolve as profile

    r = profile.load(_project(), name)
    if json_:
        from composegen.profiles import reports

        # A secret's value never reaches the output, whatever key holds it.
        return emit_json(reports.ShowReport.model_validate(r.mask(r.to_json())).to_json())
    lines = [
        f"{r.name}  ({' <- '.join(r.chain)})  hash {r.hash}",
        f"  image    {r.profile.image}",
        f"  model    {r.profile.model.id} @ {r.profile.model.revision}",
        f"  served   {r.profile.model.served_name} on {r.profile.service.port.bind}:{r.profile.service.port.host}",
        "  argv     " + " \\\n             ".join(_argv_lines(["vllm", "serve", *r.argv()])),
        *(f"  warning  {w}" for w in r.warnings),
    ]
    out(r.mask("\n".join(lines)))


def _argv_lines(argv: list[str]) -> list[str]:
    import shlex

    lines: list[str] = []
    for item in argv:
        if item.startswith("--") or not lines:
            lines.append(shlex.quote(item))
        else:
            lines[-1] += " " + shlex.quote(item)
    return lines


@app.command()
def schema(
    report: str | None = typer.Option(
        None, "--report", help="A report's JSON Schema instead (up, status, startup, shm, gate, …; see docs/json.md)."
    ),
):
    """Print the profile JSON Schema, or with --report NAME the schema of that JSON report.

    Example: composegen schema --report startup
    """
    if report is not None:
        from composegen.cli import reports

        emit_json(reports.schema(report), pretty=True)
        return
    from composegen.profiles.schema import json_schema

    emit_json(json_schema(), pretty=True)  # a file people commit and read: always indented


@app.command()
def diff(
    a: str = typer.Argument(
        ...,
        help="Profile name, compose file, or REF:path (e.g. HEAD~1:out/r33/compose.yaml).",
        autocompletion=complete_profile,
    ),
    b: str | None = typer.Argument(
        None,
        help="The other side, in any of the same forms as the first (or out/NAME/k8s/ with --targets).",
        autocompletion=complete_profile,
    ),
    functional_only: bool = typer.Option(False, "--functional-only", help="Exit status from functional changes alone."),
    unified: bool = typer.Option(False, "--unified", help="Plain unified diff of the two files."),
    targets: str | None = typer.Option(
        None, "--targets", help="compose,k8s: the same profile's two renderings, functionally (docs/kubernetes.md)."
    ),
    json_: bool = JsonOpt,
):
    """Semantic diff of two stacks: every change classed functional or identity.

    Example: composegen diff 4096-131k 8192-131k --functional-only
    """
    from composegen.errors import BadInput

    project = _project()
    if targets is not None:
        if targets.replace(" ", "") not in ("compose,k8s", "k8s,compose"):
            raise BadInput(f"--targets: {targets!r}: only compose,k8s can be compared")
        from composegen.diff import targets as cross

        report = cross.load(project.root, a, b)
        emit_json(report.to_json()) if json_ else out(cross.format_text(report))
        raise typer.Exit(0 if report.equal else 1)
    if b is None:
        raise BadInput("diff: give two inputs (or NAME --targets compose,k8s)")
    from composegen.diff import semantic as diffing

    side_a, side_b = diffing.load_side(a, project.root), diffing.load_side(b, project.root)
    identity = diffing.identity_paths_for(project, [a, b])
    changes = diffing.compare(side_a.data, side_b.data, identity_paths=identity)
    if json_:
        emit_json(diffing.changes_to_json(changes))
    elif unified:
        out(diffing.unified(side_a.text, side_b.text, side_a.label, side_b.label))
    else:
        out(diffing.format_text(changes, side_a.label, side_b.label))
    raise typer.Exit(diffing.exit_status(changes, functional_only))
