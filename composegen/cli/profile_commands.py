"""Commands that read profiles: list, validate, show, schema (render and diff have modules of their
own, so that these never import the renderer or the differ). None of them imports docker
libraries."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

from composegen.cli import reports as report_schemas
from composegen.cli.app import JsonOpt, ProfileArg, app
from composegen.cli.app import project as _project
from composegen.cli.optiongroups import flag, option, profile_arg
from composegen.errors import BadInput, CheckFailed
from composegen.output import Output, emit_json, err, table
from composegen.profiles import reports, resolve, rules
from composegen.profiles.schema import json_schema

if TYPE_CHECKING:  # annotations only: these modules load lazily (start-up time)
    from composegen.profiles.resolved import Resolved


@app.command("list")
def list_(json_: bool = JsonOpt) -> None:
    """List the profiles and what each extends.

    Example: composegen list --json
    """

    project = _project()
    rows: list[reports.ListedProfile] = []
    for name in project.profile_names():  # one bad profile must not hide the others
        try:
            r = resolve.load(project, name)
            parent = r.chain[1] if len(r.chain) > 1 else None
            row: dict[str, Any] = dict(
                extends=parent, description=r.profile.description, hash=r.hash, error=None
            )
        except BadInput as exc:
            row = dict(extends=None, description="", hash=None, error=exc.message)
        rows.append(reports.ListedProfile(name=name, **row))
    listed = [[p.name, p.extends or "-", p.description or "INVALID (see below)"] for p in rows]
    Output(json_).report(
        reports.ListReport(profiles=rows), lambda: table(listed, ["NAME", "EXTENDS", "DESCRIPTION"])
    )
    bad = [row.error for row in rows if row.error]
    for error in bad:
        err(error)
    if bad:
        raise BadInput(f"{len(bad)} of {len(rows)} profiles are invalid")


@app.command()
def validate(
    names: list[str] | None = profile_arg("Profiles to check (all by default)."),
    strict: bool = flag("--strict", "Also fail on warnings such as an unpinned image."),
    json_: bool = JsonOpt,
) -> None:
    """Check profiles: schema, flags against the vLLM catalog, cross-field rules.

    Example: composegen validate starter
    """

    resolved = resolve.load_all(_project(), names)
    shared = rules.across_profiles(resolved)
    checked = [
        reports.ValidatedProfile(
            name=r.name,
            hash=r.hash,
            warnings=r.warnings,
            pinned=r.profile.pinned,
            notes=r.notes,
            image_policy=r.profile.image_policy,
        )
        for r in resolved
    ]
    lines = []
    for r in resolved:  # with --strict a profile with warnings fails: never `ok` first
        lines.append(
            f"{'warnings present (--strict)' if strict and r.warnings else 'ok'}  {r.name}"
        )
        lines += [f"    warning: {w}" for w in r.warnings] + [f"    note: {n}" for n in r.notes]
    lines += [f"warning: {w}" for w in shared]
    Output(json_).report(
        reports.ValidateReport(profiles=checked, warnings=shared), "\n".join(lines)
    )
    if strict:
        unpinned = [
            r.name
            for r in resolved
            if not r.profile.pinned and r.profile.image_policy != "local-build"
        ]
        if unpinned:
            raise CheckFailed(f"--strict: unpinned image in {', '.join(unpinned)}")
        if shared or any(r.warnings for r in resolved):
            raise CheckFailed("--strict: warnings present")


@app.command()
def show(name: str = ProfileArg, json_: bool = JsonOpt) -> None:
    """The resolved profile and the container argv.

    Example: composegen show starter
    """

    r = resolve.load(_project(), name)
    # A secret's value never reaches the output, whatever key holds it.
    shown = r.mask(r.show_report().to_json())
    Output(json_).report(shown, lambda: r.mask("\n".join(_show_lines(r))))


def _show_lines(r: Resolved) -> list[str]:
    return [
        f"{r.name}  ({' <- '.join(r.chain)})  hash {r.hash}",
        f"  image    {r.profile.image}",
        f"  model    {r.profile.model.id} @ {r.profile.model.revision}",
        f"  served   {r.profile.model.served_name} on {r.profile.service.port.bind}:{r.profile.service.port.host}",
        "  argv     " + " \\\n             ".join(_argv_lines(["vllm", "serve", *r.argv()])),
        _caches_line(r),
        *(f"  warning  {w}" for w in r.warnings),
    ]


def _caches_line(r: Resolved) -> str:
    shown = r.show_report().caches
    if shown is None or shown.target is None:
        return "  caches   off: every start compiles again"
    where = shown.volume or f"{shown.kept} (a directory of the project)"
    return f"  caches   {where} at {shown.target}: {', '.join(shown.variables)}"


def _argv_lines(argv: list[str]) -> list[str]:
    lines: list[str] = []
    for item in argv:
        if item.startswith("--") or not lines:
            lines.append(shlex.quote(item))
        else:
            lines[-1] += " " + shlex.quote(item)
    return lines


@app.command()
def schema(
    report: str | None = option(
        None,
        "--report",
        "A report's JSON Schema instead (up, status, startup, shm, gate, …; see composegen docs json).",
    ),
) -> None:
    """Print the profile JSON Schema, or with --report NAME the schema of that JSON report.

    Example: composegen schema --report startup
    """
    # a file people commit and read: always indented
    emit_json(json_schema() if report is None else report_schemas.schema(report), pretty=True)
