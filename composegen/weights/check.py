"""`composegen weights`: is the pinned revision complete where the stack will look for it? And the
fixes: --download (from the Hub), --verify (hashes against the Hub's file metadata).

The node-level parts (a remote node's listing, copying to nodes) need the engine and live in
composegen/stack/nodecache.py; this module judges listings wherever they came from, into the shapes
of weights/reports.py."""

from __future__ import annotations

import os
from collections.abc import Callable

from composegen.errors import CheckFailed
from composegen.weights import hub as hubapi
from composegen.weights import snapshot
from composegen.weights.cache import Location
from composegen.weights.reports import WeightsFile, WeightsReport


def build(
    name: str, loc: Location, listing: snapshot.Listing, hub: dict[str, snapshot.HubFile] | None
) -> WeightsReport:
    judged = snapshot.judge(listing, hub)
    return WeightsReport(
        profile=name,
        model=loc.model_id,
        revision=loc.revision,
        cache_dir=loc.host_dir,
        container_dir=loc.container_dir,
        kind=loc.kind,
        snapshot=loc.snapshot,
        complete=judged.complete,
        files=[WeightsFile(**f) for f in judged.files],
        missing=judged.missing,
        problems=judged.problems,
        total_bytes=judged.total_bytes,
        partial_bytes=sum(listing.get("partial", {}).values()),
        hub_checked=hub is not None,
    )


def inspect(name: str, loc: Location) -> WeightsReport:
    """This host's view, offline: what the snapshot holds against what it must hold."""
    return build(name, loc, snapshot.list_local(loc.snapshot, loc.blobs), None)


def verify(report: WeightsReport, loc: Location, hub: dict[str, snapshot.HubFile]) -> list[str]:
    """Hash every present file against the Hub; the names that do not match (marked in report)."""
    bad = []
    for f in report.files:
        if f.present and f.name in hub:
            f.verified = hubapi.digest_matches(os.path.join(loc.snapshot, f.name), hub[f.name])
            if f.verified is False:
                bad.append(f.name)
                differs = "hash differs from the Hub's (corrupt or a different revision)"
                report.problems.append(f"{f.name}: {differs}")
    report.complete = report.complete and not bad
    return bad


def run(
    name: str,
    loc: Location,
    *,
    download: bool = False,
    check_hashes: bool = False,
    on_file: Callable[[str], None] = lambda n: None,
) -> WeightsReport:
    """The whole local check: list, ask the Hub when needed, download what is missing, verify."""
    # The Hub only when it is needed: a plain check (and `up`'s preflight) never waits on it.
    hub = hubapi.files(loc) if download or check_hashes else None
    report = build(name, loc, snapshot.list_local(loc.snapshot, loc.blobs), hub)
    bad = verify(report, loc, hub) if check_hashes and hub is not None else []
    if download and hub is not None:
        wrong_size = {p.split(":", 1)[0] for p in report.problems if "bytes, the Hub says" in p}
        redo = set(bad) | wrong_size
        todo = [f.name for f in report.files if not f.present or f.name in redo]
        # The index first: it names the shards, which are only known once it is here.
        todo.sort(key=lambda n: n != snapshot.INDEX)
        if todo:
            hubapi.download(loc, todo, redo, on_file, hub)
            report = build(name, loc, snapshot.list_local(loc.snapshot, loc.blobs), hub)
            rest = [f.name for f in report.files if not f.present]
            if rest:  # the shards the freshly fetched index names
                hubapi.download(loc, rest, set(), on_file, hub)
                report = build(name, loc, snapshot.list_local(loc.snapshot, loc.blobs), hub)
            if check_hashes:
                verify(report, loc, hub)
            report.downloaded = todo + rest
    return report


def require_complete(report: WeightsReport) -> None:
    if not report.complete:
        what = report.missing[:3] + report.problems[:2]
        more = len(report.missing) + len(report.problems) - len(what)
        raise CheckFailed(
            f"{report.profile}: {report.model}@{report.revision[:12]} is incomplete in {report.snapshot}: "
            + "; ".join(what)
            + (f" (+{more} more)" if more > 0 else ""),
            hint=f"`composegen weights {report.profile} --download`",
        )
