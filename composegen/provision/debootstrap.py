"""The base image when no registry answers: Debian (minbase + python3) from the machine's own apt
mirror, built with debootstrap and imported into the engine. Needs root; a few minutes.

    COMPOSEGEN_BASE_SUITE   the suite to build (default: bookworm on Debian, the host's codename elsewhere)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from composegen.errors import EngineError
from composegen.provision import system
from composegen.provision.base import ORIGIN_LABEL

DEFAULT_MIRROR = "http://deb.debian.org/debian"
SEARCH_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def os_release() -> dict[str, str]:
    try:
        text = Path("/etc/os-release").read_text(encoding="utf-8")
    except OSError:
        return {}
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line)
    return {k.strip(): v.strip().strip('"') for k, v in pairs}


def default_suite() -> str:
    rel = os_release()
    codename = rel.get("VERSION_CODENAME", "")
    return "bookworm" if rel.get("ID") == "debian" or not codename else codename


def apt_mirror(suite: str, sources: Path = Path("/etc/apt")) -> str | None:
    """The URI of the first enabled `deb` source serving SUITE (one-line .list and deb822 .sources
    files)."""
    for path in [sources / "sources.list", *sorted((sources / "sources.list.d").glob("*.list"))]:
        for line in _read(path).splitlines():
            words = line.split("#", 1)[0].split()
            if words[:1] != ["deb"]:
                continue
            words = words[1:]
            if words and words[0].startswith("["):  # [arch=… signed-by=…]
                while words and not words[0].endswith("]"):
                    words = words[1:]
                words = words[1:]
            if len(words) >= 2 and words[1] == suite:
                return words[0]
    for path in sorted((sources / "sources.list.d").glob("*.sources")):
        for stanza in _read(path).split("\n\n"):
            fields: dict[str, list[str]] = {}
            for line in stanza.splitlines():
                key, sep, value = line.partition(":")
                if sep and not line.startswith((" ", "#")):
                    fields[key.strip().lower()] = value.split()
            serves = "deb" in fields.get("types", []) and suite in fields.get("suites", [])
            if serves and fields.get("enabled", ["yes"]) != ["no"] and fields.get("uris"):
                return fields["uris"][0]
    return None


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def build(tag: str, log: system.Log, apt: system.Apt) -> str:
    """debootstrap a minimal Debian with python3 and `docker import` it as TAG; the suite built."""
    if not system.is_root():
        raise EngineError(
            f"building {tag} with debootstrap needs root",
            hint="run `sudo composegen provision`, or set COMPOSEGEN_BASE_IMAGE to an image with python3",
        )
    if system.which("debootstrap") is None:
        apt.install("debootstrap")
    suite = os.environ.get("COMPOSEGEN_BASE_SUITE") or default_suite()
    mirror = apt_mirror(suite) or DEFAULT_MIRROR
    rootfs = Path(tempfile.mkdtemp(prefix="composegen-base-", dir="/var/tmp"))
    try:
        options = ["--variant=minbase", "--include=python3"]
        log(f"debootstrap {' '.join(options)} {suite} from {mirror} (a few minutes)")
        res = system.run(["debootstrap", *options, suite, str(rootfs), mirror], timeout=1800)
        if res.returncode != 0:
            details = system.last_lines(res.stdout + res.stderr, 20)
            raise EngineError(f"debootstrap {suite} failed", details=details)
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for entry in (rootfs / junk).glob("*"):
                if entry.is_file() and not entry.is_symlink():
                    entry.unlink()
        log(f"docker import -> {tag}")
        _import(rootfs, tag, f"debootstrap {suite}")
    finally:
        shutil.rmtree(rootfs, ignore_errors=True)
    return suite


def _import(rootfs: Path, tag: str, origin: str) -> None:
    changes = [
        f"ENV PATH={SEARCH_PATH}",
        "ENV LANG=C.UTF-8",
        'CMD ["python3"]',
        f'LABEL {ORIGIN_LABEL}="{origin}"',
    ]
    argv = ["docker", "import", *(a for c in changes for a in ("--change", c)), "-", tag]
    with subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE) as tar:
        res = subprocess.run(argv, stdin=tar.stdout, capture_output=True, text=True, timeout=900)
        if tar.stdout is not None:
            tar.stdout.close()
        tar_code = tar.wait(60)
    if res.returncode != 0 or tar_code != 0:
        failed = f"docker import of the debootstrap tree as {tag} failed"
        raise EngineError(failed, details=res.stderr.strip()[-500:])
