"""`composegen weights NAME`: is the pinned revision complete where the stack looks for it?

Exit 0 complete, 1 incomplete, 2 bad input (profile, wrong revision), 3 the Hub was needed and is
not usable.

cli/main.py loads this module only for `weights` (and --help), so what the command needs is imported
at top level.
"""

from __future__ import annotations

from composegen.cli.app import JsonOpt, ProfileArg, app
from composegen.cli.app import load_profile as _load
from composegen.cli.optiongroups import flag
from composegen.errors import CheckFailed
from composegen.output import Output
from composegen.stack import driver
from composegen.weights import check
from composegen.weights.reports import WeightsReport


@app.command()
def weights(
    name: str = ProfileArg,
    download: bool = flag(
        "--download",
        "Fetch what is missing, exactly the pinned revision (resumable; HF_TOKEN honoured).",
    ),
    verify: bool = flag("--verify", "Check every file's hash against the Hub's file metadata."),
    sync: bool = flag(
        "--sync",
        "Multi-node: copy the head's snapshot to nodes that lack it (Docker API), then check.",
    ),
    json_: bool = JsonOpt,
) -> None:
    """The model cache the stack mounts: present, missing and sizes of the pinned revision's files.

    Example: composegen weights r33 --verify  # in composegen's clone
    """
    project, r = _load(name)
    show = Output(json_)
    note = lambda n: show.note(f"downloading {n}")  # noqa: E731
    report = driver.weights(project, r, download=download, verify=verify, sync=sync, on_file=note)
    show.report(report, lambda: format_text(report))
    check.require_complete(report)
    for node in report.nodes:
        if not node.complete:
            raise CheckFailed(
                f"{name}: node {node.name} lacks {report.model}@{report.revision[:12]}: "
                + (node.error or ", ".join(node.missing[:3])),
                hint=f"`composegen weights {name} --sync` copies it from the head",
            )


def format_text(report: WeightsReport) -> str:
    gib = report.total_bytes / 2**30
    lines = [
        f"{report.profile}: {report.model} @ {report.revision[:12]}",
        f"  {'directory' if report.kind == 'path' else 'cache':<9} {report.cache_dir}"
        f" (the container sees {report.container_dir})",
        f"  snapshot  {report.snapshot}",
        f"  files     {sum(f.present for f in report.files)} of {len(report.files)} present, {gib:.2f} GiB",
    ]
    if report.partial_bytes:
        lines.append(
            f"  partial   {report.partial_bytes / 2**20:.1f} MiB of interrupted downloads (resumed by --download)"
        )
    for f in report.files:
        if f.verified is False or not f.present:
            lines.append(f"  {'MISSING' if not f.present else 'CORRUPT'}   {f.name}")
    lines += [f"  problem   {p}" for p in report.problems if "hash differs" not in p]
    if report.downloaded:
        lines.append(f"  fetched   {len(report.downloaded)} file(s) from the Hub")
    for node in report.nodes:
        state = "complete" if node.complete else (node.error or f"{len(node.missing)} missing")
        lines.append(
            f"  node {node.name:<12} {node.cache_dir}: {state}, {node.total_bytes / 2**30:.2f} GiB"
        )
    if report.synced:
        lines.append(f"  synced    {', '.join(report.synced)}")
    lines.append("complete" if report.complete else "INCOMPLETE")
    return "\n".join(lines) + "\n"
