"""The local registry of scripts/provision.d/50-registry.sh: an emulator image with a layer of its own,
pushed under a unique name and removed locally, so that pulling it really downloads bytes."""

from __future__ import annotations

import os
import subprocess
import urllib.request
import uuid
from pathlib import Path

import pytest

ADDR = os.environ.get("COMPOSEGEN_REGISTRY", "127.0.0.1:5123")


def require_registry() -> str:
    try:
        urllib.request.urlopen(f"http://{ADDR}/v2/", timeout=3).close()
    except OSError as exc:
        pytest.fail(f"no registry on {ADDR} ({exc}): run `bash scripts/provision-tests.sh`")
    return ADDR


def _docker(*argv: str, stdin: bytes | None = None) -> str:
    proc = subprocess.run(["docker", *argv], input=stdin, capture_output=True, timeout=300)
    assert proc.returncode == 0, f"docker {' '.join(argv)}: {proc.stderr.decode()[-500:]}"
    return proc.stdout.decode()


def pushed_emulator(tmp: Path, megabytes: int = 24) -> str:
    """A registry-only image: the emulator plus a random layer; returns its reference (absent locally)."""
    from composegen.stack import engine

    base = engine.build_emulator_image()
    ref = f"{require_registry()}/composegen-test-{uuid.uuid4().hex[:10]}:pull"
    ctx = tmp / "ctx"
    ctx.mkdir()
    # incompressible: the download is that big
    (ctx / "blob").write_bytes(os.urandom(megabytes << 20))
    (ctx / "Dockerfile").write_text(f"FROM {base}\nCOPY blob /opt/blob\n", encoding="utf-8")
    _docker("build", "-q", "-t", ref, str(ctx))
    _docker("push", ref)
    _docker("rmi", ref)
    return ref


def remove_local(ref: str) -> None:
    """The local copy, and the image in the registry (its blobs go at the next garbage-collect, which
    provision.d/50-registry.sh runs before it starts the registry)."""
    subprocess.run(["docker", "rmi", "-f", ref], capture_output=True, timeout=120)
    repo, tag = ref.split("/", 1)[1].rsplit(":", 1)
    accept = "application/vnd.docker.distribution.manifest.v2+json"
    head = urllib.request.Request(
        f"http://{ADDR}/v2/{repo}/manifests/{tag}", method="HEAD", headers={"Accept": accept}
    )
    try:
        with urllib.request.urlopen(head, timeout=10) as resp:
            digest = resp.headers["Docker-Content-Digest"]
        urllib.request.urlopen(
            urllib.request.Request(f"http://{ADDR}/v2/{repo}/manifests/{digest}", method="DELETE"),
            timeout=10,
        ).close()
    except OSError:
        pass  # already gone
