"""`composegen cache`: the compile-cache volumes profiles/caches.py renders, on the engine (list,
verify, prune, export, import), and the record each start leaves in the project's state
(.composegen/caches/KEY.json: which profiles started with the key, when, and the last cold start's
compile seconds, which `up`'s ready summary sets beside a warm one). docs/caches.md."""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import re
import tarfile
import tempfile
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Literal

from composegen import privatestate, safewrite
from composegen.errors import BadInput, CheckFailed, ComposegenError, EngineError
from composegen.profiles import caches, resolve
from composegen.profiles.resolved import Resolved
from composegen.project import Project, compose_project
from composegen.stack import engine, engineclient
from composegen.stack.facts import ContainerFacts
from composegen.stack.placement import Deployment, NodeRef
from composegen.stack.preflight import Check, gpu_check
from composegen.stack.reports import CacheRecord, CacheReport, CacheVolume, UpReport
from composegen.stack.targets import Target
from composegen.units import format_bytes

MANIFEST = "composegen-cache.json"  # an export's last member: its CacheRecord with `files`
KEY = re.compile(rf"([0-9a-f]{{16}})({caches.EMULATED})?")  # a volume's name after the prefix
LABELS = {engine.PROBE_LABEL: "composegen-cache"}
Action = Literal["list", "verify", "prune", "export", "import"]
At = tuple[NodeRef, str, str]  # a node's engine, an image there (never started), the profile
Found = tuple[list[str], list[str]]  # _problems: what differs, what could not be checked
SMI = ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]
ASK_SMI = ["-c", f"import os; os.execvp('nvidia-smi', {SMI!r})"]  # a probe's python3 argv


def _path(project: Project, key: str, emulated: bool) -> Path:
    return privatestate.state_dir(project, "caches") / f"{key}{caches.EMULATED * emulated}.json"


def record(project: Project, key: str, emulated: bool = False) -> CacheRecord:
    doc = privatestate.read_json(path := _path(project, key, emulated), {"key": key})
    # a record from before KEY-emulated served both kinds: its real start's figure
    if isinstance(cold := doc.get("cold"), dict):
        doc = {k: v for k, v in doc.items() if k != "real"} | {"cold": cold.get("vllm")}
    try:  # the file's name says which volume
        return CacheRecord.model_validate({**doc, "key": key, "emulated": emulated})
    except ValueError:
        raise BadInput(f"{path}: not a cache record; remove it") from None


def note_start(project: Project, r: Resolved, report: UpReport, ctr: ContainerFacts | None) -> None:
    """Record a ready start in its volume's record (an emulated start's volume is its own); set the
    last cold start's compile seconds on its startup report."""
    s = report.startup
    if r.profile.caches != "volume" or s is None or s.cache is None:
        return
    try:
        rec = record(project, caches.key(r), report.emulated)
        if s.cache == "cold" and s.compile_seconds is not None:
            rec.cold = s.compile_seconds
        rec.uses[r.name] = privatestate.stamp()
        rec.image_id = engine.image_id(r.profile.image) or rec.image_id
        emulated = [f"emulated GPU, {s.gpu_total_gib or '?'} GiB (EMULATED)"]
        rec.gpus = emulated if report.emulated else (ctr and gpus(ctr)) or rec.gpus
        privatestate.write_json(_path(project, rec.key, rec.emulated), rec.to_json())
    except ComposegenError as exc:  # the stack is ready: a record it cannot keep is a warning
        report.warnings.append(f"cache record: {exc.message}")
        return
    s.cache_cold_compile_seconds = rec.cold


def filled(project: Project, name: str, emulated: bool | None, on: Target | None = None) -> bool:
    """Will NAME's next start (its head's, ON that engine) find its cache volume filled by a start
    the record names (of either kind when EMULATED is None)? False when it cannot say."""
    try:
        r = resolve.load(project, name)
        kinds = (False, True) if emulated is None else (emulated,)
        key = caches.key(r)
        used = [caches.volume_name(key, k) for k in kinds if record(project, key, k).uses]
        present = [v for v in used if engineclient.volume_present(v, on)]
        return r.profile.caches == "volume" and bool(present)
    except ComposegenError:
        return False


def gpus(ctr: ContainerFacts | None, image: str = "", on: Target | None = None) -> list[str] | None:
    """`NAME, DRIVER` of each GPU as nvidia-smi says in CTR, else in a probe container of IMAGE
    (on that engine) with every GPU; None when it cannot say."""
    every = {"device_requests": [{"count": -1, "capabilities": [["gpu"]]}]}
    try:
        probe = lambda: engine.run_probe(image, ASK_SMI, "composegen-cache", on, **every)  # noqa: E731
        code, text = engine.exec_output(ctr, SMI) if ctr else (0, probe())
    except EngineError:
        return None
    rows = [", ".join(p.strip() for p in line.split(",")) for line in text.splitlines()]
    return (sorted(row for row in rows if row) or None) if code == 0 else None


def _rendering(project: Project, only: str | None = None) -> dict[str, list[Resolved]]:
    """key -> the profiles here that render it (caches: volume)."""
    keys: dict[str, list[Resolved]] = {}
    for r in resolve.load_all(project, [only] if only else None):
        if r.profile.caches == "volume":
            keys.setdefault(caches.key(r), []).append(r)
    return keys


def cache_volumes(
    project: Project, action: Action, only: str | None = None, on: Target | None = None
) -> CacheReport:
    """Every cache volume on the engine (ON: a node's), with this project's records and rendering
    profiles (verify: this project's keys, present or not, their emulated volumes when there)."""
    rendering, prefix = _rendering(project, only), resolve.prefix(project)
    found = {v.name: v for v in engineclient.volumes(caches.VOLUME_PREFIX, on)}
    ours = {caches.volume_name(k) for k in rendering}
    ours |= {caches.volume_name(k, True) for k in rendering} & set(found)
    out = []
    for name in sorted(set(found) if action != "verify" else ours):
        m = KEY.fullmatch(tail := name.removeprefix(caches.VOLUME_PREFIX))
        rec = record(project, m[1], bool(m[2])) if m else CacheRecord(key=tail)
        v = found.get(name)
        mine = {compose_project(p, None, prefix) for p in rec.uses}  # made by a stack here
        row = CacheVolume(
            key=rec.key,
            volume=name,
            emulated=rec.emulated,
            present=v is not None,
            bytes=v.bytes if v else None,
            created=v.created if v else None,
            last_use=max(rec.uses.values(), default=None),
            used_by=sorted(rec.uses),
            mounted_by=v.users if v else [],
            rendered_by=[r.name for r in rendering.get(rec.key, [])],
            ours=bool(v and v.labels.get("com.docker.compose.project") in mine),
            cold_compile_seconds=rec.cold,
            gpus=rec.gpus,
        )
        if action == "verify" and v:
            row.problems, row.unchecked = _problems(rendering[rec.key], rec)
        out.append(row)
    return CacheReport(project=str(project.root), action=action, volumes=out)


def _problems(rendering: list[Resolved], rec: CacheRecord, on: Target | None = None) -> Found:
    """Why a volume no longer matches this host (ON: a node's): another image under the profile's
    reference; for a real start's, no GPU runtime or other GPUs than filled it; what is unchecked."""
    image = rendering[0].profile.image
    now = engine.image_id(image, on)
    found = []
    if rec.image_id and now and now != rec.image_id:
        found.append(f"{image} is now {now[:19]}; the cache was filled by {rec.image_id[:19]}")
    if rec.emulated:
        return found, []
    if gpu_check(False, on).status != "ok":
        return [*found, "a real start filled it, and this engine has no GPU runtime now"], []
    now_on = gpus(None, image, on)
    if rec.gpus and now_on and now_on != rec.gpus:
        found.append(f"the GPUs are {'; '.join(now_on)}; it was filled on {'; '.join(rec.gpus)}")
    why = "the start that filled it did not say" if now_on else "nothing could run nvidia-smi"
    return found, [f"GPUs not checked: {why}"] * (not rec.gpus or not now_on)


def cache_prune(project: Project, unused_days: int | None, yes: bool) -> CacheReport:
    """Remove (with `yes`; else say) this project's volumes no profile renders any more, or unused
    for UNUSED_DAYS; never one another project made, nor one a container mounts."""
    report = cache_volumes(project, "prune")
    cutoff = privatestate.now() - timedelta(days=unused_days) if unused_days is not None else None
    chosen = []
    for v in report.volumes:
        last = privatestate.parse_stamp(v.last_use)
        stale = cutoff is not None and last is not None and last < cutoff
        if v.ours and v.present and not v.mounted_by and (not v.rendered_by or stale):
            if yes:
                engineclient.remove_volume(v.volume)
                _path(project, v.key, v.emulated).unlink(missing_ok=True)
            v.pruned = yes
            chosen.append(v)
    report.volumes = chosen
    return report


def _key(key: str) -> tuple[str, bool]:
    if not (m := KEY.fullmatch(key)):  # nothing but hex and the suffix: a plain file name
        raise BadInput(f"KEY: {key!r} is not a cache key (16 hex[-emulated]: `cache list`)")
    return m[1], bool(m[2])


def _one(
    project: Project, action: Action, key: tuple[str, bool], file: Path, at: At | None
) -> CacheReport:
    """`cache_volumes` narrowed to KEY's volume (absent: a row saying so; AT: one profile's)."""
    report = cache_volumes(project, "list", at[2] if at else None, at[0].target if at else None)
    name = caches.volume_name(*key)
    report.volumes = [v for v in report.volumes if v.volume == name] or [
        CacheVolume(key=key[0], volume=name, present=False, emulated=key[1])
    ]
    report.action, report.file = action, str(file)
    return report


def cache_export(project: Project, key: str, file: Path, at: At | None = None) -> CacheReport:
    """KEY's volume (AT a node's engine) into a new FILE (never through a link): its files and
    directories (links skipped), then MANIFEST: the record with each file's sha256."""
    on, image = (at[0].target, at[1]) if at else (None, engine.BASE_IMAGE)
    report = _one(project, "export", (kind := _key(key)), file, at)
    if not report.volumes[0].present:
        raise BadInput(f"KEY: no volume {report.volumes[0].volume} here (`composegen cache list`)")
    try:
        fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        raise BadInput(f"{file}: {exc.strerror}; export writes a new file only") from None
    sums: dict[str, str] = {}
    with (
        os.fdopen(fd, "wb") as sink,
        tarfile.open(fileobj=sink, mode="w|") as out,
        engineclient.read_volume(report.volumes[0].volume, image, LABELS, on) as chunks,
        tarfile.open(fileobj=_stream(chunks), mode="r|") as src,
    ):
        for m in src:
            m.name = m.name.partition("/")[2]
            if m.name in ("", MANIFEST) or not (m.isfile() or m.isdir()):
                report.skipped += [m.name] if m.name else []
                continue
            data = src.extractfile(m).read() if m.isfile() else b""  # type: ignore[union-attr]
            sums.update({m.name: hashlib.sha256(data).hexdigest()} if m.isfile() else {})
            out.addfile(m, io.BytesIO(data))
        rec = record(project, *kind).model_copy(update={"files": sums})
        m = tarfile.TarInfo(MANIFEST)
        data = json.dumps(rec.to_json(), sort_keys=True).encode()
        m.size, m.mode, m.mtime = len(data), 0o600, int(privatestate.now().timestamp())
        out.addfile(m, io.BytesIO(data))
    report.files = len(sums)
    return report


def cache_import(project: Project, file: Path, at: At | None = None) -> CacheReport:
    """FILE (an export) into a new volume of its key (AT a node's engine: the record stays the
    head's); refused (exit 1: _refusal; exit 2: _members, the volume removed again) unless every
    member is safe and as its manifest says."""
    on, image = (at[0].target, at[1]) if at else (None, engine.BASE_IMAGE)
    try:
        fd = os.open(file, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        why = "import never follows a link" if exc.errno == errno.ELOOP else exc.strerror
        raise BadInput(f"{file}: {why}") from None
    try:
        with os.fdopen(fd, "rb") as f, tarfile.open(fileobj=f, mode="r:") as tar:
            manifest = _manifest(tar, file)
            report = _one(project, "import", (manifest.key, manifest.emulated), file, at)
            rendering = _rendering(project, at[2] if at else None).get(manifest.key) or []
            if why := _refusal(report.volumes[0], rendering, manifest, on):
                raise CheckFailed(f"{file}: {why}; refused")
            name, labels = report.volumes[0].volume, {caches.KEY_LABEL: manifest.key}
            first = rendering[0]
            owner = at[0].project if at else compose_project(first.name, None, first.prefix)
            engineclient.create_volume(name, labels | {"com.docker.compose.project": owner}, on)
            try:
                members = _members(tar, manifest, file)
                engine.put_archive(image, LABELS[engine.PROBE_LABEL], on, name, members)
            except BaseException:
                engineclient.remove_volume(name, on)
                raise
    except tarfile.TarError as exc:
        raise BadInput(f"{file}: not a readable tar ({exc}); nothing imported") from None
    rec = manifest.model_copy(update={"uses": {}, "files": {}})
    if at is None:
        privatestate.write_json(_path(project, manifest.key, manifest.emulated), rec.to_json())
    report.files = len(manifest.files)
    return report


def offer_nodes(dep: Deployment, emulated: bool, image: str) -> list[Check]:
    """Multi-node `up`: a worker whose engine has no volume of the profile's key gets the head's,
    when a start the project's record names filled it: exported once on the head's engine, imported
    on the worker's with every check and refusal of `cache import`; else it starts cold, said why."""
    key, out = caches.key(dep.r) + caches.EMULATED * emulated, []
    if not dep.multi or not filled(dep.project, dep.name, emulated, dep.head.target):
        return []
    with tempfile.TemporaryDirectory(dir=privatestate.state_dir(dep.project)) as tmp:
        file = Path(tmp) / key
        for n in dep.nodes[1:]:
            try:
                if engineclient.volume_present(caches.VOLUME_PREFIX + key, n.target):
                    continue
                if not file.exists():  # exported once for every worker; a failed one, tried again
                    (part := file.with_name("part")).unlink(missing_ok=True)
                    cache_export(dep.project, key, part, (dep.head, image, dep.name))
                    part.rename(file)
                cache_import(dep.project, file, (n, image, dep.name))
                size = format_bytes(file.stat().st_size)
                ok, said = "ok", f"gets the head's cache {key} ({size})"
            except (ComposegenError, OSError, tarfile.TarError) as exc:
                ok, said = "warn", f"starts cold: {getattr(exc, 'message', exc)}"
            out.append(Check(n.named("cache"), ok, f"node {n.name} {said}"))
    return out


def _refusal(
    v: CacheVolume, rendering: list[Resolved], m: CacheRecord, on: Target | None
) -> str | None:
    if not rendering:
        return f"key {m.key} is not one a profile here renders (another image, model or flags)"
    if v.present:
        return f"{v.volume} is already on this engine (`composegen cache prune`, docker volume rm)"
    return "; ".join(_problems(rendering, m, on)[0]) or None


def _manifest(tar: tarfile.TarFile, file: Path) -> CacheRecord:
    """The archive's manifest, then every member checked against it by name and kind."""
    members = tar.getmembers()
    doc = next((m for m in members if m.name == MANIFEST and m.isfile()), None)
    raw = tar.extractfile(doc) if doc is not None and doc.size < 64 << 20 else None
    try:
        manifest = CacheRecord.model_validate_json(raw.read() if raw else b"")
    except ValueError:
        raise BadInput(f"{file}: no {MANIFEST}: not a `composegen cache export`") from None
    if not ((k := KEY.fullmatch(manifest.key)) and not k[2]):  # the record's file is named by it
        raise BadInput(f"{file}: {manifest.key!r} is not a cache key; nothing imported")
    for m in members:
        _check_member(m, manifest, file)
    return manifest


def _check_member(m: tarfile.TarInfo, manifest: CacheRecord | None, file: Path) -> None:
    bad = [p for p in m.name.removesuffix("/").split("/") if safewrite.component_problem(p)]
    if bad or not (m.isfile() or m.isdir()):
        what = "a name that is not plain path components" if bad else "not a file or directory"
        raise BadInput(f"{file}: {m.name!r}: {what}; refused, nothing imported")
    if manifest and m.isfile() and m.name not in (*manifest.files, MANIFEST):
        raise BadInput(f"{file}: {m.name!r} is not in its manifest; refused, nothing imported")


def _members(tar: tarfile.TarFile, manifest: CacheRecord, file: Path) -> Iterator[bytes]:
    """The archive again for the engine, each member checked again and hashed, owned by root."""
    for m in tar.getmembers():
        _check_member(m, manifest, file)
        if m.name == MANIFEST:
            continue
        data = tar.extractfile(m).read() if m.isfile() else b""  # type: ignore[union-attr]
        if m.isfile() and hashlib.sha256(data).hexdigest() != manifest.files[m.name]:
            raise BadInput(f"{file}: {m.name}: its sha256 differs from the manifest; refused")
        m.uid, m.gid, m.uname, m.gname, m.mode = 0, 0, "root", "root", m.mode & 0o777
        yield m.tobuf(tarfile.PAX_FORMAT) + data + b"\0" * (-len(data) % tarfile.BLOCKSIZE)
    yield b"\0" * (2 * tarfile.BLOCKSIZE)


def _stream(chunks: Iterator[bytes]) -> Any:
    """The engine's chunks as a file tarfile's stream mode reads (it takes short reads)."""
    return SimpleNamespace(read=lambda size=-1: next((c for c in chunks if c), b""))
