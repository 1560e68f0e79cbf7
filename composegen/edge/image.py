"""The local edge image: Debian's Caddy binary and CA bundle on the base image (whose python3 runs
the gatekeeper), tagged by the sha256 of its build context — what edge.yaml pins when no registry is
reachable.

The tag `composegen/edge:<16 hex>` is content-derived, the way the emulator image is: the same
Dockerfile, caddy binary and CA bundle give the same tag on any machine; a different caddy gives a
different tag, so a pin recorded in edge.yaml either names exactly these bytes or `edge up` refuses
it. The CA bundle is made from the roots the ca-certificates package ships
(/usr/share/ca-certificates/mozilla, sorted), not the host's /etc/ssl/certs/ca-certificates.crt,
which also holds the machine's own CA additions (a company proxy's, a sandbox's): so two hosts with
the same caddy and ca-certificates packages give the same tag and the checked-in example pin works
on a fresh machine (issue 40). Without that directory, the host bundle. What it does not pin: the
base image's bytes (composegen/base:py3 is built locally by `composegen provision`), named by its
tag. Stdlib only; the engine builds it (`edge up`, when the pinned tag is missing).
"""

from __future__ import annotations

import re
from pathlib import Path

from composegen.buildcontext import ContextFile, context_digest

LOCAL_REPO = "composegen/edge"
LOCAL_RE = re.compile(re.escape(LOCAL_REPO) + r":[0-9a-f]{16}")
CADDY = Path("/usr/bin/caddy")  # Debian's caddy package (scripts/provision.d/70-caddy.sh)
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")  # for acme: Caddy talks TLS to the CA
# what the ca-certificates package ships
PACKAGED_ROOTS = Path("/usr/share/ca-certificates/mozilla")
DOCKERFILE = (
    b"ARG BASE\nFROM ${BASE}\nCOPY caddy /usr/bin/caddy\n"
    b"COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt\n"
)


def is_local(ref: str) -> bool:
    return LOCAL_RE.fullmatch(ref) is not None


def packaged_bundle(roots: Path = PACKAGED_ROOTS, fallback: Path = CA_BUNDLE) -> bytes:
    """The package's root certificates, one PEM after another by name (else the host bundle)."""
    files = (
        sorted(p for p in roots.glob("*.crt") if p.is_file() and not p.is_symlink())
        if roots.is_dir()
        else []
    )
    if not files:
        return fallback.read_bytes()
    return b"".join(
        data if data.endswith(b"\n") else data + b"\n" for data in (p.read_bytes() for p in files)
    )


def context_files(caddy: Path = CADDY, ca_bundle: Path | None = None) -> list[ContextFile]:
    """The build context; FileNotFoundError names the missing host file."""
    return [
        ContextFile("Dockerfile", DOCKERFILE, 0o644),
        ContextFile(
            "ca-certificates.crt", ca_bundle.read_bytes() if ca_bundle else packaged_bundle(), 0o644
        ),
        ContextFile("caddy", caddy.read_bytes(), 0o755),
    ]


def local_tag(files: list[ContextFile] | None = None) -> str:
    """composegen/edge:<16 hex of the context's sha256> for this machine's caddy and CA bundle."""
    return f"{LOCAL_REPO}:{context_digest(files if files is not None else context_files())[:16]}"
