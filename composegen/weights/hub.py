"""The Hugging Face Hub side: file metadata of the pinned revision, hashes, and the download.

Everything goes through huggingface_hub, so HF_ENDPOINT, HF_TOKEN (sent, never printed), proxies and
its resumable downloads (blobs/*.incomplete continued with a Range request) behave as they do for
vLLM. Failures become composegen errors: a revision or repository the Hub does not know is bad input
(2); no answer, or an answer that refuses access (401 on a gated repo), is "the Hub is not usable"
(3)."""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from composegen import safewrite
from composegen.errors import BadInput, EngineError, WriteFailed
from composegen.weights import cachedirs, transfer
from composegen.weights.cache import Location
from composegen.weights.snapshot import HubFile

if TYPE_CHECKING:  # huggingface_hub is imported where it is used (start-up time)
    from huggingface_hub.file_download import HfFileMetadata
    from huggingface_hub.hf_api import ModelInfo, RepoSibling

CHUNK = 8 * 2**20
T = TypeVar("T")


def _endpoint() -> str:
    return os.environ.get("HF_ENDPOINT") or "https://huggingface.co"


def _is_transport(exc: BaseException) -> bool:
    names = {c.__name__ for c in type(exc).__mro__}
    transport = {"TransportError", "ConnectionError", "Timeout", "OfflineModeIsEnabled"}
    return bool(names & (transport | {"TimeoutError"}))


def translate(exc: BaseException, loc: Location, where: str) -> Exception:
    """A huggingface_hub failure as a composegen error (exit 2 or 3)."""
    from huggingface_hub import errors  # why: the Hub client loads only when the Hub is asked

    status = getattr(getattr(exc, "response", None), "status_code", None)
    if isinstance(exc, errors.GatedRepoError) or status == 401 or status == 403:
        token = "HF_TOKEN is set but" if os.environ.get("HF_TOKEN") else "no HF_TOKEN is set, and"
        return EngineError(
            f"the Hub at {_endpoint()} refused {loc.model_id} ({status or 'gated'}: {where}); {token} the repository "
            "is gated or private",
            hint="accept the model's terms on the Hub and export HF_TOKEN with a token that has access",
        )
    hub = f"{loc.model_id} on {_endpoint()}"
    if isinstance(exc, errors.RevisionNotFoundError):
        return BadInput(f"model.revision: {loc.revision} is not a revision of {hub}")
    if isinstance(exc, errors.RepositoryNotFoundError):
        return BadInput(f"model.id: {loc.model_id} is not a repository on {_endpoint()}")
    if isinstance(exc, errors.RemoteEntryNotFoundError):
        return EngineError(
            f"{where}: the Hub has no such file in {loc.model_id}@{loc.revision[:12]}"
        )
    if _is_transport(exc):
        why = f"{type(exc).__name__}: {where}"
        return EngineError(f"the Hugging Face Hub at {_endpoint()} is unreachable ({why})")
    first = str(exc).splitlines()[0][:200]
    return EngineError(f"the Hub at {_endpoint()} failed ({where}): {first}")


# the file listing of one revision; a Hub that takes longer is not answering
METADATA_DEADLINE_S = 120.0
_HEX = re.compile(r"[0-9a-f]+")


def files(loc: Location, deadline_s: float = METADATA_DEADLINE_S) -> dict[str, HubFile]:
    """Every file of the pinned revision with its size and hashes (model_info with file metadata),
    within `deadline_s` in all, and every field checked before it is used."""
    # why: up's preflight checks weights offline, without the Hub client
    from huggingface_hub import HfApi

    def listing() -> ModelInfo:
        return HfApi(endpoint=_endpoint()).model_info(
            loc.model_id, revision=loc.revision, files_metadata=True
        )

    try:
        info = _within(listing, deadline_s, "model info")
    except EngineError:
        raise
    except Exception as exc:
        raise translate(exc, loc, "model info") from None
    out = {}
    for s in info.siblings or []:
        out[s.rfilename] = _checked_file(s)
    return out


def _checked_file(s: RepoSibling) -> HubFile:
    """One sibling of a model_info reply, its fields checked (a lying Hub cannot hand over a list as
    a size)."""
    name, size, lfs, blob = s.rfilename, s.size, s.lfs, s.blob_id
    sha256 = getattr(lfs, "sha256", None) if lfs else None

    def hex_or_none(value: object, length: int) -> bool:
        return value is None or (
            isinstance(value, str) and len(value) == length and bool(_HEX.fullmatch(value))
        )

    sized = size is None or (type(size) is int and 0 <= size < 2**50)
    hashes = hex_or_none(sha256, 64) and hex_or_none(blob, 40)
    if not (isinstance(name, str) and name and sized and hashes):
        entry = f"a file entry that is not one ({repr(name)[:80]}: name, size or hash)"
        raise EngineError(f"the Hub at {_endpoint()} sent {entry}")
    return HubFile(size, sha256, blob)


def _within(call: Callable[[], T], deadline_s: float, where: str) -> T:
    """`call()` with a total deadline: huggingface_hub's client has per-read timeouts only, so a Hub
    that drips its reply would hold a read for ever. The call runs in a daemon thread; past the
    deadline this says so (exit 3) and the thread is left to the process's end."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # handed to the caller
            box["error"] = exc

    worker = threading.Thread(target=run, name=f"hub {where}", daemon=True)
    worker.start()
    worker.join(deadline_s)
    if worker.is_alive():
        raise EngineError(
            f"the Hub at {_endpoint()} sent no complete {where} within {deadline_s:g} s"
        )
    if "error" in box:
        raise box["error"]
    return box["value"]


def digest_matches(path: str, want: HubFile) -> bool | None:
    """sha256 for LFS files, the git blob sha1 otherwise; None when the Hub gave neither. Anything
    but a regular file behind the name (a FIFO, a device planted in the cache) does not match."""
    if not (want.sha256 or want.git_sha1):
        return None
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO must not block the open
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return False
        h = hashlib.sha256() if want.sha256 else hashlib.sha1(usedforsecurity=False)
        if not want.sha256:
            h.update(b"blob %d\0" % st.st_size)
        while chunk := fh.read(CHUNK):
            h.update(chunk)
    return h.hexdigest() == (want.sha256 or want.git_sha1)


def _expected_size(
    name: str, announced: int | None, listed: dict[str, HubFile] | None
) -> int | None:
    """The size a file must have: the Hub's listing and its own metadata, which must agree."""
    size = listed[name].size if listed and name in listed else None
    if announced is not None and (not isinstance(announced, int) or not 0 <= announced < 2**50):
        raise EngineError(
            f"{name}: the server at {_endpoint()} announced a size that is not one; refused"
        )
    if size is not None and announced is not None and size != announced:
        lists = f"the Hub lists {size} bytes but the file announces {announced}"
        raise EngineError(f"{name}: {lists}; refused")
    return size if size is not None else announced


_ETAG = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")


def download(
    loc: Location,
    names: list[str],
    force: set[str],
    on_file: Callable[[str], None],
    listed: dict[str, HubFile] | None = None,
) -> None:
    """Fetch `names` of exactly the pinned revision into the cache (or the model.path directory).

    Resumable across runs: bytes go to blobs/<etag>.incomplete (the cache's own name for a partial
    blob) and a later run continues it with a Range request. Recent huggingface_hub releases delete
    partial files, so the transfer uses its pieces (metadata HEAD, http_get with resume_size, its
    headers with HF_TOKEN) and lays the cache out itself: blobs/<etag>, snapshots/<rev>/<name> ->
    ../../blobs/<etag>. `force` names files to fetch again (a failed hash).

    Names and etags come from the server: each must be one plain path component, and every directory
    below the cache root is opened without following links (cachedirs.py), so nothing lands outside
    it. Every file has a total deadline and a size cap (transfer.py): its size in `listed` (the
    Hub's listing) or its metadata, which must agree; a transfer past either is exit 3 and leaves no
    partial file."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_url  # why: as in files()

    for name in names:
        if (problem := safewrite.component_problem(name)) is not None:
            refused = f"{problem}; refused (not one plain file name)"
            raise EngineError(f"{loc.model_id}: the file name {name!r} {refused}")
    for name in names:
        on_file(name)
        try:
            url = hf_hub_url(loc.model_id, name, revision=loc.revision, endpoint=_endpoint())
            meta = get_hf_file_metadata(url)
            if meta.commit_hash and meta.commit_hash != loc.revision:
                served = f"the Hub served commit {meta.commit_hash}, not {loc.revision}"
                raise EngineError(f"{name}: {served}")
            etag = meta.etag or ""
            if loc.kind == "hub" and not _ETAG.fullmatch(etag):
                not_plain = f"the Hub's etag {etag[:80]!r} is not a plain blob name"
                raise EngineError(f"{name}: {not_plain}; refused")
            _fetch_blob(loc, name, meta, force, listed)
        except (EngineError, BadInput):
            raise
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EFBIG, errno.EROFS, errno.EDQUOT):
                raise WriteFailed(f"{loc.host_dir}: cannot write {name}: {exc.strerror}") from None
            raise translate(exc, loc, name) from None
        except Exception as exc:
            raise translate(exc, loc, name) from None


def _fetch_blob(
    loc: Location,
    name: str,
    meta: HfFileMetadata,
    force: set[str],
    listed: dict[str, HubFile] | None,
) -> None:
    """One file into the cache: resumed from its partial blob, bounded by its budget, then settled
    and (for the Hub) linked from the snapshot."""
    from huggingface_hub.file_download import http_get  # why: as in files()
    from huggingface_hub.utils import build_hf_headers  # why: as in files()

    etag = meta.etag or ""
    with cachedirs.Dirs(loc) as dirs:
        store, final = dirs.blob_dir(), (name if loc.kind == "path" else etag)
        partial = final + ".incomplete"
        if name in force:
            cachedirs.remove(store, final)
            cachedirs.remove(store, partial)
        if not cachedirs.is_file(store, final, loc):
            budget = transfer.budget_for(_expected_size(name, meta.size, listed))

            def fetch(
                fh: transfer.CappedFile,
                url: str = meta.location,
                name: str = name,
                budget: transfer.Budget = budget,
            ) -> None:
                http_get(
                    url,
                    fh,  # type: ignore[arg-type]  # a file as far as http_get can tell
                    resume_size=fh.tell(),
                    headers=build_hf_headers(),
                    expected_size=budget.cap if budget.cap_known else None,
                    displayed_filename=name,
                )

            try:
                with cachedirs.append(store, partial, loc) as fh:
                    transfer.run(fetch, fh, budget)
            except transfer.OverBudget as exc:
                cachedirs.remove(store, partial)  # a lying server's bytes are not resumed
                stopped = f"the server at {_endpoint()} {exc}; download stopped"
                raise EngineError(f"{name}: {stopped}") from None
            cachedirs.settle(store, partial, final, loc)
        if loc.kind == "hub":
            cachedirs.link(dirs.snapshot_dir(), name, f"../../blobs/{etag}", loc)
