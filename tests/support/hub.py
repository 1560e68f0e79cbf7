"""A local stand-in for the Hugging Face Hub (stdlib HTTP on 127.0.0.1) serving the few endpoints
huggingface_hub calls for `composegen weights`: model info with file metadata (sha256 / LFS), and
`resolve/{rev}/{file}` (HEAD and GET, with Range). Point the client at it with HF_ENDPOINT.

Repositories are added with `add_repo`; a gated one answers 401 (X-Error-Code: GatedRepo) unless the
request carries `Authorization: Bearer <token>`. `stall(name, after)` makes the next GET of a file stop
after `after` bytes until `release()` (to interrupt a download mid-file); every request is logged.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import secrets
import threading
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from tests.support.stub_server import Quiet, serving, url

_INFO = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)(?:/revision/(?P<rev>[^/]+))?$")
_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")


@dataclass
class Repo:
    files: dict[str, bytes]
    sha: str = field(default_factory=lambda: secrets.token_hex(20))
    token: str | None = None  # gated: this bearer token is required


@dataclass
class Request:
    method: str
    path: str
    range: str | None
    authorized: bool


def git_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def is_lfs(name: str) -> bool:
    return name.endswith(".safetensors")


class Hub:
    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.log: list[Request] = []
        self._stall: dict[str, int] = {}
        self._released = threading.Event()
        self.stalled = threading.Event()  # set once a stalled GET has sent its bytes
        self._serving = contextlib.ExitStack()

    @property
    def url(self) -> str:
        return url(self.server)

    def start(self) -> Hub:
        hub = self

        class Handler(Quiet):
            protocol_version = "HTTP/1.1"

            def do_HEAD(self) -> None:
                hub._handle(self, head=True)

            def do_GET(self) -> None:
                hub._handle(self, head=False)

        self.server = self._serving.enter_context(serving(Handler))
        return self

    def close(self) -> None:
        self._released.set()
        self._serving.close()

    def add_repo(self, repo_id: str, files: dict[str, bytes], token: str | None = None) -> Repo:
        self.repos[repo_id] = Repo(dict(files), token=token)
        return self.repos[repo_id]

    def stall(self, name: str, after: int) -> None:
        self._released.clear()
        self.stalled.clear()
        self._stall[name] = after

    def release(self) -> None:
        self._released.set()

    def gets(self, name: str) -> list[Request]:
        return [r for r in self.log if r.method == "GET" and r.path.endswith("/" + name)]

    # ---- serving -------------------------------------------------------------------------------

    def _handle(self, h: Quiet, head: bool) -> None:
        path = unquote(urlsplit(h.path).path)
        auth = h.headers.get("Authorization", "")
        self.log.append(Request(h.command, path, h.headers.get("Range"), bool(auth)))
        m = _INFO.match(path) or _RESOLVE.match(path)
        repo = self.repos.get(m["repo"]) if m else None
        if m is None or repo is None:
            return self._error(h, 404, "RepoNotFound", "Repository not found", head)
        if repo.token is not None and auth != f"Bearer {repo.token}":
            return self._error(h, 401, "GatedRepo", "Access to this model is restricted", head)
        rev = m["rev"] or "main"
        if rev not in (repo.sha, "main"):
            return self._error(h, 404, "RevisionNotFound", f"Invalid rev id: {rev}", head)
        if "file" not in m.groupdict():
            return self._info(h, m["repo"], repo, head)
        data = repo.files.get(m["file"])
        if data is None:
            return self._error(
                h, 404, "EntryNotFound", "Entry not found", head, {"X-Repo-Commit": repo.sha}
            )
        self._file(h, m["file"], repo, data, head)

    def _info(self, h: Quiet, repo_id: str, repo: Repo, head: bool) -> None:
        siblings = []
        for name, data in sorted(repo.files.items()):
            entry: dict = {"rfilename": name, "size": len(data), "blobId": git_sha1(data)}
            if is_lfs(name):
                entry["lfs"] = {
                    "size": len(data),
                    "sha256": hashlib.sha256(data).hexdigest(),
                    "pointerSize": 134,
                }
            siblings.append(entry)
        body = json.dumps(
            {"id": repo_id, "modelId": repo_id, "sha": repo.sha, "siblings": siblings}
        ).encode()
        self._send(h, 200, {"Content-Type": "application/json"}, body, head)

    def _file(self, h: Quiet, name: str, repo: Repo, data: bytes, head: bool) -> None:
        etag = hashlib.sha256(data).hexdigest() if is_lfs(name) else git_sha1(data)
        headers = {"X-Repo-Commit": repo.sha, "ETag": f'"{etag}"', "Accept-Ranges": "bytes"}
        if is_lfs(name):
            headers |= {"X-Linked-Etag": f'"{etag}"', "X-Linked-Size": str(len(data))}
        start, status = 0, 200
        ranged = re.match(r"bytes=(\d+)-(\d*)$", h.headers.get("Range", ""))
        if ranged and not head:
            start, end = int(ranged[1]), int(ranged[2]) if ranged[2] else len(data) - 1
            headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
            data, status = data[start : end + 1], 206
        stall = None if head else self._stall.pop(name, None)
        if stall is None:
            return self._send(h, status, headers, data, head)
        h.reply(status, data, headers, upto=stall)
        h.wfile.flush()
        self.stalled.set()
        self._released.wait(120)
        h.close_connection = True  # the client went away: end here, the rest is never sent

    def _error(
        self, h, status: int, code: str, message: str, head: bool, extra: dict | None = None
    ) -> None:
        body = json.dumps({"error": message}).encode()
        headers = {
            "X-Error-Code": code,
            "X-Error-Message": message,
            "Content-Type": "application/json",
        }
        self._send(h, status, {**headers, **(extra or {})}, body, head)

    def _send(self, h: Quiet, status: int, headers: dict, body: bytes, head: bool) -> None:
        h.reply(status, body, headers, head)  # the hook a lying hub overrides


def tiny_model(shards: int = 3, shard_bytes: int = 1 << 20, seed: int = 7) -> dict[str, bytes]:
    """A checkpoint's file set: config, tokenizer, generation config, an index and its shards (random bytes)."""
    import random

    rnd = random.Random(seed)
    names = [f"model-{i:05d}-of-{shards:05d}.safetensors" for i in range(1, shards + 1)]
    weight_map = {f"layers.{i}.weight": names[i % shards] for i in range(shards * 2)}
    files = {
        "config.json": json.dumps(
            {"architectures": ["TinyForCausalLM"], "hidden_size": 8}
        ).encode(),
        "tokenizer.json": json.dumps({"version": "1.0", "model": {"type": "BPE"}}).encode(),
        "tokenizer_config.json": json.dumps({"model_max_length": 4096}).encode(),
        "generation_config.json": json.dumps({"temperature": 0.6}).encode(),
        "README.md": b"# tiny\n",
        "model.safetensors.index.json": json.dumps(
            {"metadata": {}, "weight_map": weight_map}
        ).encode(),
    }
    for name in names:
        files[name] = rnd.randbytes(shard_bytes)
    return files
