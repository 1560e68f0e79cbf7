"""Weights on every node: the engine-facing half of `composegen weights` and of `up`'s weights
preflight. Every node but a local head is read through its own engine, by the same listing script
(weights/snapshot.py) in a throw-away container, so a worker is judged exactly like the head; how
`--sync` copies through the Docker API is in docs/weights.md.

When `up` finds the weights complete it adds a compose override setting HF_HUB_OFFLINE=1 (unless
`service.hf_online`), so the engine never reaches for the Hub; out/ stays as rendered."""

from __future__ import annotations

import json
import os
import tarfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from composegen import privatestate
from composegen.errors import BadInput, ComposegenError
from composegen.profiles.resolved import Resolved
from composegen.project import Project
from composegen.stack import compose, engine
from composegen.stack.placement import Deployment, NodeRef, deployment
from composegen.stack.preflight import Check
from composegen.stack.targets import Target
from composegen.weights import cache, check, snapshot
from composegen.weights.reports import NodeWeights, WeightsReport

MOUNT = "/composegen-cache"
CHUNK = 2**20


def weights_everywhere(
    project: Project,
    r: Resolved,
    *,
    download: bool,
    verify: bool,
    sync: bool,
    on_file: Callable[[str], None],
) -> WeightsReport:
    """`composegen weights`: the head's cache (downloaded, hash-checked on request), then every
    worker's against it, after `sync` copied the head's snapshot to those that lack it."""
    dep = deployment(project, r)
    if sync and not dep.multi:
        raise BadInput(f"--sync: {r.name} is not a multi-node profile; there is nothing to copy to")
    loc = _locate(dep, dep.head)
    report = check.run(r.name, loc, download=download, check_hashes=verify, on_file=on_file)
    if dep.multi:
        if sync:
            report.synced = sync_nodes(dep, loc, report)
        report.nodes = check_nodes(dep, report)
    return report


def _locate(dep: Deployment, n: NodeRef) -> cache.Location:
    return cache.locate(dep.r, n.member, dep.project.out_path(dep.name).parent)


def probe_image(r: Resolved, target: Target) -> str:
    """An image on that engine with python3: the profile's, else composegen's base image."""
    for image in (r.profile.image, engine.BASE_IMAGE):
        if engine.image_present(image, target):
            return image
    msg = f"neither {r.profile.image} nor {engine.BASE_IMAGE} is on {target.label}"
    raise engine.EngineError(msg)


def listing(
    r: Resolved, loc: cache.Location, target: Target, remote: bool, image: str | None = None
) -> snapshot.Listing:
    """LISTING_PY's answer for a node: in-process for a local head, else in a container there."""
    if not remote:
        return snapshot.list_local(loc.snapshot, loc.blobs)

    def inside(path: str) -> str:
        return path.replace(loc.host_dir, MOUNT, 1)

    blobs = inside(loc.blobs) if loc.blobs else loc.blobs
    raw = engine.run_probe(
        image or probe_image(r, target),
        ["-c", snapshot.LISTING_PY, snapshot.listing_args(inside(loc.snapshot), blobs)],
        r.name,
        target,
        network_mode="none",
        binds={loc.host_dir: {"bind": MOUNT, "mode": "ro"}},
    )
    try:
        return snapshot.checked_listing(json.loads(raw.strip().splitlines()[-1]))
    except (ValueError, IndexError) as exc:  # the node's probe container wrote something else
        msg = f"the weights listing on {target.label} is unreadable: {exc}"
        raise engine.EngineError(msg) from None


def check_nodes(dep: Deployment, head: WeightsReport) -> list[NodeWeights]:
    """Every worker's cache against the head's list of required files."""
    out = []
    for n in dep.nodes[1:]:
        loc = _locate(dep, n)
        where = {"name": str(n.name), "engine": n.target.label, "cache_dir": loc.host_dir}
        row = NodeWeights(**where, snapshot=loc.snapshot, complete=False, missing=[], total_bytes=0)
        out.append(row)
        try:
            found = snapshot.judge(listing(dep.r, loc, n.target, remote=True))
            sizes = {f.name: f.bytes for f in head.files if f.present}
            wrong = [
                name
                for name, size in sizes.items()
                if name not in found.missing and _size(found, name) != size
            ]
            row.missing = found.missing + [
                name for name in sizes if name not in {f["name"] for f in found.files}
            ]
            row.complete = found.complete and not row.missing and not wrong
            row.missing += [f"{name} (size differs from the head's)" for name in wrong]
            row.total_bytes = found.total_bytes
        except ComposegenError as exc:
            row.error = exc.message
    return out


def _size(judged: snapshot.Judged, name: str) -> int | None:
    return next((f["bytes"] for f in judged.files if f["name"] == name), None)


def sync_nodes(dep: Deployment, head_loc: cache.Location, head: WeightsReport) -> list[str]:
    """Copy the head's complete snapshot to every worker whose copy is not; the names synced."""
    check.require_complete(head)
    lacking = {node.name for node in check_nodes(dep, head) if not node.complete}
    synced = []
    for n in dep.nodes[1:]:
        if n.name not in lacking:
            continue
        loc = _locate(dep, n)
        names = [f.name for f in head.files if f.present]
        image = probe_image(dep.r, n.target)
        engine.put_archive(image, dep.name, n.target, loc.host_dir, _tar_stream(head_loc, names))
        synced.append(str(n.name))
    return synced


def _tar_stream(loc: cache.Location, names: list[str]) -> Iterator[bytes]:
    """A tar of the files relative to the cache root (a hub cache: blobs/<etag> plus the snapshot's
    links; a model directory: the plain files), written by a thread into a pipe."""
    rfd, wfd = os.pipe()

    def write() -> None:
        with os.fdopen(wfd, "wb") as pipe, tarfile.open(fileobj=pipe, mode="w|") as tar:
            for name in names:
                path = os.path.join(loc.snapshot, name)
                rel = os.path.relpath(path, loc.host_dir)
                if os.path.islink(path):
                    blob = os.path.realpath(path)
                    tar.add(blob, arcname=os.path.relpath(blob, loc.host_dir))
                    info = tarfile.TarInfo(rel)
                    info.type, info.linkname = tarfile.SYMTYPE, os.readlink(path)
                    tar.addfile(info)
                else:
                    tar.add(path, arcname=rel)

    threading.Thread(target=write, name="composegen-sync-tar", daemon=True).start()
    with os.fdopen(rfd, "rb") as src:
        while chunk := src.read(CHUNK):
            yield chunk


# ---- up ------------------------------------------------------------------------------------------


def preflight_checks(
    dep: Deployment, image: str | None, emulate: bool, allow_download: bool
) -> tuple[list[Check], bool]:
    """The weights check of `up` on every node, and whether they are complete everywhere.
    Incomplete fails on a real host unless --allow-download; under --emulate it is a warning."""
    r = dep.r
    bad_status = "warn" if emulate or allow_download else "fail"
    if allow_download:
        fix = "the engine will download them at start (--allow-download)"
    elif emulate:
        fix = "emulated: the engine loads nothing"
    else:
        fix = f"`composegen weights {r.name} --download`"
    checks, complete = [], True
    for n in dep.nodes:
        name = n.named("weights")
        try:
            loc = _locate(dep, n)
            # a remote head: its engine
            remote = n.member is not None and (n.rank != 0 or not n.target.is_local)
            files = listing(r, loc, n.target, remote, image if remote else None)
            report = check.build(r.name, loc, files, None)
        except ComposegenError as exc:
            checks.append(Check(name, bad_status, exc.message))
            complete = False
            continue
        pinned = f"{loc.model_id}@{loc.revision[:12]}"
        if report.complete:
            gib = report.total_bytes / 2**30
            checks.append(Check(name, "ok", f"{pinned}: {len(report.files)} files, {gib:.1f} GiB"))
            continue
        complete = False
        what = ", ".join((report.missing + report.problems)[:3])
        more = len(report.missing) + len(report.problems) - 3
        what += f" (+{more} more)" if more > 0 else ""
        why = f"{pinned} is incomplete in {loc.snapshot}: missing {what}; {fix}"
        checks.append(Check(name, bad_status, why))
    return checks, complete


def override_path(project: Project, r: Resolved, node: str | None) -> Path:
    # runtime state, next to the emulate override; not out/
    base = project.root / privatestate.STATE_DIR / r.name
    return (base / node if node else base) / "weights.override.yaml"


def offline_override(project: Project, r: Resolved, node: str | None, offline: bool) -> Path | None:
    """Write (or remove) the override running the engine with HF_HUB_OFFLINE=1; its path."""
    path = override_path(project, r, node)
    if not offline or r.profile.service.hf_online:
        path.unlink(missing_ok=True)
        return None
    text = (
        f"# composegen: the weights of {r.profile.model.id}@{r.profile.model.revision[:12]} were complete at `up`\n"
        'services:\n  vllm:\n    environment:\n      HF_HUB_OFFLINE: "1"\n'
    )
    path = privatestate.state_dir(project, r.name, *([node] if node else [])) / path.name
    privatestate.write(path, text)
    return path


def with_offline(
    st: compose.Stack, project: Project, r: Resolved, node: str | None
) -> compose.Stack:
    """The stack with the HF_HUB_OFFLINE override preflight wrote for this node, if it did."""
    path = override_path(project, r, node)
    if path.is_file():
        st.files.append(path)
    return st
