"""The edge on the real engine: a local image holding Debian's real Caddy (provision.d/70-caddy.sh) and the
base image's python3 (for the gatekeeper), pushed to the local registry so edge.yaml pins it by digest;
a project with two tiny emulated profiles and an edge in front of them; cleanup of what a test made."""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import shutil
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from composegen import privatestate
from composegen.edge.keys import KEY_PREFIX
from composegen.profiles import resolve
from composegen.project import Project
from tests.support.engine import _SINGLE_REST, force_remove, free_port, tiny_profile
from tests.support.helpers import make_project, run_cli
from tests.support.registry import require_registry

# a client key as keys.add makes it (KEY_PREFIX + token_urlsafe(32)): what must never leak
KEY_RE = re.compile(KEY_PREFIX.encode() + rb"[A-Za-z0-9_-]{43}")

# a standby engine's own words while asleep (vLLM's 503; the emulator's): never relayed to a client
ENGINE_ASLEEP = "engine is sleeping"

CADDY = "/usr/bin/caddy"
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"


def _docker(*argv: str) -> str:
    proc = subprocess.run(["docker", *argv], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"docker {' '.join(argv)}: {proc.stderr[-800:]}"
    return proc.stdout


def edge_image(tmp: Path) -> str:
    """REGISTRY/composegen-edge-caddy@sha256:… (the session fixture builds it once)."""
    if not Path(CADDY).is_file():
        pytest.fail("no caddy binary: run `bash scripts/provision.sh` (provision.d/70-caddy.sh)")
    from composegen.stack.engine import BASE_IMAGE

    ctx = tmp / "edge-image"
    ctx.mkdir(exist_ok=True)
    shutil.copy(CADDY, ctx / "caddy")
    shutil.copy(CA_BUNDLE, ctx / "ca-certificates.crt")
    (ctx / "Dockerfile").write_text(
        f"FROM {BASE_IMAGE}\nCOPY caddy /usr/bin/caddy\nCOPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt\n",
        encoding="utf-8",
    )
    ref = f"{require_registry()}/composegen-edge-caddy:test"
    _docker("build", "-q", "-t", ref, str(ctx))
    _docker("push", ref)
    digests = json.loads(_docker("image", "inspect", "--format", "{{json .RepoDigests}}", ref))
    return next(d for d in digests if d.startswith(ref.rsplit(":", 1)[0] + "@"))


@dataclass
class EdgeProject:
    root: Path
    name: str  # the edge's name (compose project SCOPE-NAME)
    old: str  # profile first behind the alias (the "8192-131k" role)
    new: str  # the candidate (the "4096-131k" role)
    port: int
    metrics_port: int
    ports: dict[str, int]
    scope: str = "composegen"  # composegen.yaml's scope.name: the prefix of its compose projects

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def cli(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return run_cli("--root", str(self.root), *args, timeout=timeout)

    def ok(self, *args: str, timeout: float = 300) -> str:
        res = self.cli(*args, timeout=timeout)
        assert res.returncode == 0, f"{args}: {res.returncode}\n{res.stdout}\n{res.stderr}"
        return res.stdout

    def ca_file(self) -> Path:
        path = self.root / "edge-root.crt"
        if not path.is_file():
            path.write_text(self.ok("edge", "ca"), encoding="utf-8")
        return path

    def context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file()))

    def request(
        self,
        method: str,
        path: str,
        key: str | None = None,
        body: dict | None = None,
        timeout: float = 30,
    ) -> tuple[int, dict[str, str], bytes]:
        """(status, headers, body) of one HTTPS request to the edge, verified against its internal CA."""
        headers = {"Content-Type": "application/json"}
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        data = (
            json.dumps(body).encode() if body is not None else (b"{}" if method == "POST" else None)
        )
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=self.context()) as resp:
                return resp.status, dict(resp.headers), resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, dict(exc.headers), exc.read()

    def container_started(self, profile: str) -> str:
        return _docker(
            "inspect", "--format", "{{.State.StartedAt}}", f"{self.scope}-{profile}-vllm-1"
        ).strip()

    def gate_log(self) -> str:
        proc = subprocess.run(
            ["docker", "logs", f"{self.scope}-{self.name}-gate-1"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        return proc.stdout + proc.stderr

    def cleanup(self) -> None:
        for profile in (self.old, self.new):
            force_remove(f"{self.scope}-{profile}")
        subprocess.run(
            ["docker", "compose", "-p", f"{self.scope}-{self.name}", "-f", str(self.root / "out/edge/compose.yaml"),
             "down", "-v", "-t", "1"],
            capture_output=True, timeout=120,
        )  # fmt: skip
        force_remove(f"{self.scope}-{self.name}")


class Poller(threading.Thread):
    """Chat requests to the alias through the edge's TLS listener, back to back, each answer kept:
    (status, retry-after, model or stage). Each request has a deadline (a hang is kept as -1);
    PAUSE_S between them (longer for a long test: each request is a TLS handshake on a shared CPU)."""

    def __init__(
        self, edge: EdgeProject, key: str, limit_s: float = 900.0, pause_s: float = 0.05
    ) -> None:
        super().__init__(daemon=True)
        self.edge, self.key, self.seen, self.stop = edge, key, [], threading.Event()
        self.pause_s = pause_s
        self.deadline = time.monotonic() + limit_s  # a test that forgets to stop it still ends

    def __enter__(self) -> Poller:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.join(60)

    def wait_for(self, count: int, limit_s: float = 60.0) -> None:
        """Until COUNT answers are kept (fails at LIMIT_S, or when the poller died)."""
        deadline = time.monotonic() + limit_s
        while len(self.seen) < count:
            assert self.is_alive(), f"the poller stopped after {len(self.seen)} answers"
            assert time.monotonic() < deadline, f"{len(self.seen)} answers in {limit_s} s"
            time.sleep(0.05)

    def untold(self, *models: str) -> list:
        """The answers that are neither one of MODELS nor 503 + Retry-After + composegen's stage."""
        return [s for s in self.seen if not ((s[0] == 200 and s[2] in models) or _told(*s))]

    def run(self) -> None:
        while not self.stop.is_set() and time.monotonic() < self.deadline:
            self.seen.append(self._ask())
            self.stop.wait(self.pause_s)

    def _ask(self) -> tuple[int, str | None, object]:
        body = {
            "model": "ds4-flash",
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 2,
        }
        try:
            status, headers, data = self.edge.request(
                "POST", "/v1/chat/completions", self.key, body, timeout=30
            )
        # a dropped connection or no answer in time is an error without Retry-After: kept, fails
        except OSError as exc:
            return -1, None, repr(exc)
        try:
            doc = json.loads(data) if data else {}
        except ValueError:  # not JSON (a proxy's error page): kept, fails below
            return status, headers.get("Retry-After"), data[:200]
        error = doc.get("error") or {}
        return (
            status,
            headers.get("Retry-After"),
            (doc.get("model") if status == 200 else error.get("stage", data[:200])),
        )


def phases(seen: list) -> list[str]:
    """The answers collapsed: consecutive answers of one kind become one entry."""
    kinds = []
    for status, _, what in seen:
        kind = what if status == 200 else "503"
        if not kinds or kinds[-1] != kind:
            kinds.append(kind)
    return kinds


def _told(status: int, retry_after: str | None, stage: object) -> bool:
    """503 + Retry-After + a stage in composegen's words (never the engine's own)."""
    return (
        status == 503
        and bool(retry_after)
        and isinstance(stage, str)
        and ENGINE_ASLEEP not in stage.lower()
    )


def sealed_decision(
    project: Project, campaign: str, profile: str, decision: str = "promote"
) -> bytes:
    """runs/campaigns/CAMPAIGN/: a comparison.json whose arm ran PROFILE at its current hash, and the
    decision.json `campaign decide` would write for it (sealed with the project's records key)."""
    where = project.runs_dir / "campaigns" / campaign
    where.mkdir(parents=True)
    record = json.dumps({"arms": [{"arm": "candidate", "profile": profile,
                                   "profile_hash": resolve.load(project, profile).hash}]}).encode()  # fmt: skip
    (where / "comparison.json").write_bytes(record)
    doc = {"decision": decision, "profile": profile, "campaign": campaign, "why": "faster at equal quality",
           "decided_at": "2026-12-01T21:00:00Z", "evidence_sha256": hashlib.sha256(record).hexdigest()}  # fmt: skip
    data = json.dumps({**doc, "seal": privatestate.seal(project, doc)}).encode()
    (where / "decision.json").write_bytes(data)
    return data


@contextlib.contextmanager
def serving(project: EdgeProject) -> Iterator[EdgeProject]:
    """PROJECT's edge up and its aliased (old) stack up behind it, emulated; everything removed afterwards."""
    try:
        project.ok("edge", "up")
        project.ok("up", project.old, "--emulate")
        yield project
    finally:
        project.cleanup()


def edge_project(
    tmp: Path,
    image: str,
    *,
    load: float = 1.0,
    retry_after: int = 1,
    tls: str = "internal",
    new_env: dict | None = None,
    gpu: str | None = None,
    standby: bool = False,
    both_env: dict | None = None,
    share: float | None = None,
    tools: bool = False,
) -> EdgeProject:
    """GPU: a device id of its own for both stacks (a campaign's exclusive mode: other tests hold GPU 0).
    STANDBY: both profiles resident with sleep mode (level 1); BOTH_ENV: emulator settings of both.
    SHARE: both profiles' --gpu-memory-utilization (default vLLM's 0.92: the two emulated engines share
    the project's emulated GPU, so two of them fit awake only below 0.5 each). TOOLS: both profiles
    call tools (auto tool choice, the hermes parser), so a campaign's gates pass."""
    tag = uuid.uuid4().hex[:6]
    old, new = f"e{tag}-8192", f"e{tag}-4096"
    ports = {old: free_port(), new: free_port()}
    env = {
        name: "".join(f'    {k}: "{v}"\n' for k, v in {**(both_env or {}), **extra}.items())
        for name, extra in ((old, {}), (new, new_env or {}))
    }
    tail = "standby: {level: 1}\n" if standby else ""
    profiles = {
        name: tiny_profile(
            f"{name}-served",
            f"{{host: {ports[name]}}}",
            rest=_SINGLE_REST.format(load=load, extra_env=env[name]) + tail,
        )
        .replace(
            "gpus: {count: 1}", f'gpus: {{device_ids: ["{gpu}"]}}' if gpu else "gpus: {count: 1}"
        )
        .replace(
            "max-num-seqs: 1\n",
            f"max-num-seqs: 1\n  gpu-memory-utilization: {share}\n"
            if share
            else "max-num-seqs: 1\n",
        )
        .replace(
            "max-num-seqs: 1\n",
            "max-num-seqs: 1\n  enable-auto-tool-choice: true\n  tool-call-parser: hermes\n"
            if tools
            else "max-num-seqs: 1\n",
        )
        for name in (old, new)
    }
    root = make_project(tmp, profiles)
    port, metrics = free_port(), free_port()
    (root / "edge.yaml").write_text(
        f"name: edge-{tag}\n"
        f"listen: {{bind: 127.0.0.1, port: {port}}}\n"
        f"tls: {{mode: {tls}, names: [localhost, 127.0.0.1]}}\n"
        f"metrics: {{port: {metrics}}}\n"
        f"stacks: [{old}, {new}]\n"
        f"aliases: {{ds4-flash: {old}}}\n"
        f'images: {{proxy: "{image}", gate: "{image}"}}\n'
        f"retry_after: {retry_after}\n",
        encoding="utf-8",
    )
    project = EdgeProject(root, f"edge-{tag}", old, new, port, metrics, ports)
    project.ok("render")
    return project
