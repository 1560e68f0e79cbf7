"""`composegen weights NAME`: is the pinned revision complete where the stack looks for it?

Exit 0 complete, 1 incomplete, 2 bad input (profile, wrong revision), 3 the Hub was needed and is not usable.
"""

from __future__ import annotations

import typer

from composegen.cli.app import JsonOpt, ProfileArg, app
from composegen.cli.app import load_profile as _load
from composegen.errors import BadInput
from composegen.output import emit_json, err, out


@app.command()
def weights(
    name: str = ProfileArg,
    download: bool = typer.Option(
        False, "--download", help="Fetch what is missing, exactly the pinned revision (resumable; HF_TOKEN honoured)."
    ),
    verify: bool = typer.Option(False, "--verify", help="Check every file's hash against the Hub's file metadata."),
    sync: bool = typer.Option(
        False, "--sync", help="Multi-node: copy the head's snapshot to nodes that lack it (Docker API), then check."
    ),
    json_: bool = JsonOpt,
):
    """The model cache the stack mounts: present, missing and sizes of the pinned revision's files.

    Example: composegen weights r33 --verify
    """
    from composegen.weights import check

    project, r = _load(name)
    if sync and r.profile.nodes is None:
        raise BadInput(f"--sync: {name} is not a multi-node profile; there is nothing to copy to")
    report = _check(project, r, download, verify, sync, quiet=json_)
    if json_:
        emit_json(report.to_json())
    else:
        out(format_text(report))
    check.require_complete(report)
    for node in report.nodes:
        if not node.complete:
            from composegen.errors import CheckFailed

            raise CheckFailed(
                f"{name}: node {node.name} lacks {report.model}@{report.revision[:12]}: "
                + (node.error or ", ".join(node.missing[:3])),
                hint=f"`composegen weights {name} --sync` copies it from the head",
            )


def _check(project, r, download: bool, verify: bool, sync: bool, quiet: bool):
    from composegen.weights import cache, check

    head = _head(r)
    loc = cache.locate(r, head, project.out_path(r.name).parent)
    on_file = (lambda n: None) if quiet else (lambda n: err(f"downloading {n}"))
    report = check.run(r.name, loc, download=download, check_hashes=verify, on_file=on_file)
    if r.profile.nodes is not None:
        from composegen.stack.nodecache import check_nodes, sync_nodes

        if sync:
            report.synced = sync_nodes(project, r, loc, report)
        report.nodes = check_nodes(project, r, report)
    return report


def _head(r):
    nodes = r.profile.nodes
    return None if nodes is None else nodes.head


def format_text(report) -> str:
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
        lines.append(f"  node {node.name:<12} {node.cache_dir}: {state}, {node.total_bytes / 2**30:.2f} GiB")
    if report.synced:
        lines.append(f"  synced    {', '.join(report.synced)}")
    lines.append("complete" if report.complete else "INCOMPLETE")
    return "\n".join(lines) + "\n"
