"""Evidence bundles: runs/<UTC YYYYmmddTHHMMSSZ>-<profile>/ with evidence.json (the model
reports/bundle.py: EvidenceBundle) and the raw files it hashes: startup.log (when given),
startup.json, gates.json, ladder.json, bench.json, plus any `extra_raw` (qualify.json).

`write_run` writes into a temporary directory and renames it into place, so a reader never sees
half a bundle. A field is null and listed in `unknown` rather than filled from the profile when the
run cannot vouch for it: a log recorded elsewhere (`from_log`, source "log") says nothing about the
image or compose file that host ran. `from_log` refuses (BadInput) a log whose model or
max_model_len contradicts the profile, unless force. `load_run` hands back the model plus `path`;
BadInput for a missing or malformed bundle, CheckFailed when a raw file is missing or its sha256
differs from the record. This module never drives an engine (evidence/capture.py does).
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from composegen import __version__, privatestate, safewrite
from composegen.bench.reports import BenchResult
from composegen.bench.spec import context as run_context
from composegen.errors import BadInput, CheckFailed, WriteFailed
from composegen.evidence import record
from composegen.evidence.latest import latest_run
from composegen.evidence.reports.bundle import (
    ContainerFact,
    EvidenceBundle,
    GateFacts,
    LadderFacts,
    LoadedRun,
    ProfileRef,
    RawFile,
    StartupFacts,
)
from composegen.evidence.reports.gate import GateResult
from composegen.evidence.reports.ladder import LadderResult
from composegen.profiles import resolve
from composegen.profiles.resolved import Resolved
from composegen.project import Project, read_input
from composegen.report import JsonObject
from composegen.stack.reports import LiveIdentity
from composegen.vllm import startup
from composegen.vllm.redact import mask
from composegen.vllm.reports import StartupCheck, StartupReport

SCHEMA = record.SCHEMA
MAX_EVIDENCE_BYTES = 64 << 20
EVIDENCE = "evidence.json"
REQUIRED_KEYS = ("schema", "profile", "startup", "source", "unknown", "raw", "created_at")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_sha256(path: Path) -> str:
    """Streamed: a raw startup.log can be hundreds of megabytes."""
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _json_bytes(value: object) -> bytes:
    return (json.dumps(value, indent=2, sort_keys=True) + "\n").encode("utf-8")


def image_digest(r: Resolved, container: LiveIdentity | None) -> str | None:
    """The digest of the image the container really runs: the profile's when the engine holds the
    image under it, else another registry digest the engine knows; null for a local build (the
    emulator)."""
    if container is None:
        return None
    digests = [d.split("@", 1)[1] for d in container.repo_digests if "@" in d]
    wanted = r.profile.image.split("@", 1)[1] if r.profile.pinned else None
    return wanted if wanted in digests else (digests[0] if digests else None)


def write_run(
    project: Project,
    r: Resolved,
    *,
    startup_log_text: str | None,
    startup_report: StartupReport,
    gates: GateResult | None = None,
    ladder: LadderResult | None = None,
    source: Literal["stack", "log"] = "stack",
    bench: BenchResult | None = None,
    extra_raw: dict[str, JsonObject] | None = None,
    now: datetime | None = None,
    container: LiveIdentity | None = None,
) -> Path:
    # The bundle is where results become JSON; a secret the engine echoed (a key in its args, a
    # token in a URL) is masked before anything is kept.
    rec = run_context(bench, startup_report.cache, source == "stack")
    parts = [startup_report, gates, ladder, bench]
    parts_json = [part.to_json() if part else None for part in parts]
    startup_log_text, startup_json, gates, ladder, bench, extra_raw = r.mask(
        [startup_log_text, *parts_json, extra_raw]
    )
    now = (now or datetime.now(UTC)).astimezone(UTC)
    missing: set[str] = set()
    digest = image_digest(r, container) if source == "stack" else None
    compose = project.out_path(r.name)
    compose_sha = _sha256(compose.read_bytes()) if source == "stack" and compose.is_file() else None
    effective = startup_json.get("effective_args") or {}
    revision = effective.get("revision") or (
        r.profile.model.revision if source == "stack" else None
    )
    for key, value in (
        ("image_digest", digest),
        ("compose_sha256", compose_sha),
        ("model_revision", revision),
        ("gates", gates),
        ("ladder", ladder),
        ("startup_log", startup_log_text),
    ):
        if value is None:
            missing.add(key)
    raw: dict[str, bytes] = {}
    if startup_log_text is not None:
        raw["startup.log"] = startup_log_text.encode("utf-8")
    # each part as its report's JSON (bench.json: `evidence --bench`, qualify's bench criteria)
    as_json = {"startup": startup_json, "gates": gates, "ladder": ladder, "bench": bench}
    for part, value in as_json.items():
        if value is not None:
            raw[f"{part}.json"] = _json_bytes(value)
    # e.g. qualify.json: hashed like every raw file
    for file_name, value in (extra_raw or {}).items():
        if file_name in raw or file_name == EVIDENCE or Path(file_name).name != file_name:
            raise ValueError(f"extra_raw: {file_name!r} is not a free plain file name")
        raw[file_name] = _json_bytes(value)
    evidence = EvidenceBundle(
        schema=record.SCHEMA,
        profile=ProfileRef(name=r.name, hash=r.hash),
        image_digest=digest,
        model_revision=revision,
        compose_sha256=compose_sha,
        startup=StartupFacts.model_validate(startup_json),
        gates=GateFacts.model_validate(gates) if gates else None,
        ladder=LadderFacts.model_validate(ladder) if ladder else None,
        bench=BenchResult.model_validate(bench) if bench else None,
        container=ContainerFact.model_validate(container.to_json()) if container else None,
        emulated=bool(container and container.emulated),
        comparability=rec,
        composegen_version=__version__,
        created_at=privatestate.stamp(now),
        source=source,
        unknown=sorted(missing),
        raw=[
            RawFile(file=name, sha256=_sha256(data), bytes=len(data)) for name, data in raw.items()
        ],
    )
    name = f"{now.strftime('%Y%m%dT%H%M%SZ')}-{r.name}"
    runs_dir = project.inside(project.runs_dir)  # refused when runs/ is a link to elsewhere
    return _publish(runs_dir, name, {**raw, EVIDENCE: _json_bytes(evidence.as_read())})


def _publish(runs_dir: Path, name: str, files: dict[str, bytes]) -> Path:
    """Write every file into a hidden temp directory, fsync, then rename it to runs/<name>[-N]."""
    try:
        # private: 0700 directories, 0600 files
        runs_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = runs_dir / f".tmp-{name}-{os.getpid()}-{secrets.token_hex(4)}"
        tmp.mkdir(mode=0o700)
    except OSError as exc:
        msg = f"{runs_dir}: cannot write a run bundle: {exc.strerror or exc} (nothing written)"
        raise WriteFailed(msg) from None
    try:
        for file_name in files:
            safewrite.component(file_name, "a run bundle's file name")
        for file_name, data in files.items():
            safewrite.write(tmp / file_name, data, base=tmp, private=True)
        for n in range(1, 1000):
            # two runs in one second keep both
            final = runs_dir / (name if n == 1 else f"{name}-{n}")
            try:
                final.mkdir()  # claim the name atomically, then swap the finished bundle in
            except FileExistsError:
                continue
            os.replace(tmp, final)  # an empty directory is replaced in one step
            return final
        raise CheckFailed(f"{runs_dir}: too many runs named {name}")
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        msg = f"{runs_dir}: cannot write a run bundle: {exc.strerror or exc} (nothing written)"
        raise WriteFailed(msg) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


MAX_LOG_BYTES = 256 * 2**20  # a startup log is a few MB; /dev/zero or a runaway log is not one


def read_log(path: Path) -> bytes:
    """A startup log given with --from-log: a regular file or a pipe, at most MAX_LOG_BYTES."""
    rule, where = "--from-log takes a regular file or a pipe", f"{path}: --from-log"
    return read_input(
        path, where, MAX_LOG_BYTES, "a startup log", rule, stream_ok=True, follow=True
    )


def from_log(project: Project, name: str, log_path: str | Path, *, force: bool = False) -> Path:
    r = resolve.load(project, name)
    path = Path(log_path)
    text = read_log(path).decode("utf-8", errors="replace")
    report: StartupReport = startup.parse_startup_log(text)
    if report.kv_cache_tokens is None and not report.errors and report.vllm_version is None:
        msg = f"{path}:1: --from-log: not a vLLM startup log (no version, KV cache or error lines)"
        raise BadInput(msg)
    if report.effective_args is not None:
        found = startup.mismatches(r.engine_flags(), report.effective_args, r.catalog)
        report = StartupCheck(**dict(report), mismatches=found)
    if not force:
        _refuse_contradiction(path, text, r, report)
    return write_run(project, r, startup_log_text=mask(text), startup_report=report, source="log")


def _refuse_contradiction(path: Path, text: str, r: Resolved, report: StartupReport) -> None:
    """A log of another model or context length is not evidence for this profile (BadInput, exit
    2)."""
    model = (report.effective_args or {}).get("model")
    wanted_len = r.flag("max-model-len")
    for field, logged, profiled, needle in (
        ("model", model, r.profile.model.id, "non-default args"),
        (
            "max_model_len",
            report.max_model_len,
            wanted_len if isinstance(wanted_len, int) else None,
            "max",
        ),
    ):
        if logged is None or profiled is None or logged == profiled:
            continue
        line = next(
            (i for i, ln in enumerate(text.splitlines(), 1) if needle in ln and str(logged) in ln),
            1,
        )
        raise BadInput(
            f"{path}:{line}: --from-log: {field}: the log says {r.mask(repr(logged))}, profile {r.name} says "
            f"{r.mask(repr(profiled))}",
            hint="pass --force to keep it as this profile's run anyway",
        )


def resolve_run(spec: str | Path, root: str | Path | None = None) -> Path:
    path = Path(spec)
    if path.name == EVIDENCE:
        path = path.parent
    if path.is_dir():
        return path
    if root is not None:
        under = Path(root) / "runs" / str(spec)
        if under.is_dir():
            return under
        if (Path(root) / "profiles" / f"{spec}.yaml").is_file():  # a profile name: its latest run
            return latest_run(Path(root), str(spec))
    msg = f"{spec}: run: no such run directory (give runs/<run>, a path to a bundle, or a profile name)"
    raise BadInput(msg)


def _parse_evidence(doc_path: Path) -> object:
    """evidence.json parsed, bounded (a JSON value of any kind yet); every way it can be unreadable
    is bad input."""
    if not doc_path.is_file():
        raise BadInput(f"{doc_path}: evidence: missing (not a composegen run directory)")
    if doc_path.is_symlink() or doc_path.stat().st_size > MAX_EVIDENCE_BYTES:
        msg = f"{doc_path}: evidence: a link, or larger than {MAX_EVIDENCE_BYTES >> 20} MiB"
        raise BadInput(msg)
    try:
        doc = json.loads(doc_path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise BadInput(f"{doc_path}:1: evidence: not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise BadInput(f"{doc_path}:{exc.lineno}: evidence: invalid JSON ({exc.msg})") from None
    # a number past Python's digit limit; nesting past the stack
    except (ValueError, RecursionError) as exc:
        raise BadInput(f"{doc_path}:1: evidence: unreadable JSON ({type(exc).__name__})") from None
    return doc


def _check_raw(entries: list[RawFile], bundle: Path, doc_path: Path) -> None:
    """Every raw file the evidence lists (its model checked the list's shape) is there, a plain
    name, with its recorded sha256."""
    for entry in entries:
        raw_path = bundle / entry.file
        if Path(entry.file).name != entry.file:
            raise BadInput(f"{doc_path}: raw: {entry.file!r} is not a plain file name")
        if not raw_path.is_file():
            raise CheckFailed(f"{raw_path}: raw file recorded in evidence.json is missing")
        actual = file_sha256(raw_path)
        if actual != entry.sha256:
            raise CheckFailed(
                f"{raw_path}: sha256 {actual[:12]}… differs from the recorded "
                f"{entry.sha256[:12]}… (the bundle was changed after it was written)"
            )


def load_run(path: str | Path, root: str | Path | None = None) -> LoadedRun:
    bundle = resolve_run(path, root)
    doc_path = bundle / EVIDENCE
    doc = _parse_evidence(doc_path)
    if not isinstance(doc, dict):
        raise BadInput(f"{doc_path}:1: evidence: must be a JSON object")
    if doc.get("schema") != SCHEMA:
        raise BadInput(f"{doc_path}: schema: expected {SCHEMA!r}, got {doc.get('schema')!r}")
    absent = [k for k in REQUIRED_KEYS if k not in doc]
    if absent:
        raise BadInput(f"{doc_path}: {absent[0]}: required key is missing")
    model = record.check_document(doc, str(doc_path))
    _check_raw(model.raw, bundle, doc_path)
    return LoadedRun.at(model, bundle)


def format_text(doc: LoadedRun, shown_path: str | None = None) -> str:
    """SHOWN_PATH: the bundle as the reader named it (default: where it was read from)."""
    startup = doc.startup
    lines = [
        f"run {doc.path if shown_path is None else shown_path}",
        f"  profile   {doc.profile.name} (hash {doc.profile.hash}), source {doc.source}",
        f"  created   {doc.created_at} by composegen {doc.composegen_version}",
        f"  image     {doc.image_digest or 'unknown'}",
        f"  revision  {doc.model_revision or 'unknown'}",
        f"  compose   {doc.compose_sha256 or 'unknown'}",
        f"  KV        {startup.kv_cache_tokens} tokens, {startup.kv_cache_gib_min} GiB min rank",
    ]
    if doc.emulated:
        lines.insert(
            1, "  EMULATED  vLLM test double: these figures exercise composegen, not a model"
        )
    gates = doc.gates
    lines.append(f"  gates     {gates.passed}/{gates.total}" if gates else "  gates     not run")
    ladder = doc.ladder
    lines.append(
        f"  ladder    largest prompt {ladder.largest_prompt_tokens}"
        if ladder
        else "  ladder    not run"
    )
    if bench := doc.bench:
        levels = ", ".join(
            f"c{lv.concurrency} {lv.request_throughput} req/s" for lv in bench.levels
        )
        lines.append(f"  bench     {levels}")
    if doc.unknown:
        lines.append(f"  unknown   {', '.join(doc.unknown)}")
    for entry in doc.raw:
        lines.append(f"  raw       {entry.file} {entry.sha256[:16]} ({entry.bytes} bytes)")
    return "\n".join(lines) + "\n"
