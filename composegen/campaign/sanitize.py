"""What may leave the machine. comparison.json and campaign.md carry figures, our own labels,
profile names and configuration differences; no free text of a raw file (a gate's or the engine's
error, a server address) is copied into them at all. What is left (configuration values, the
operator's reasons) passes through `scrub`, which replaces:

  IPv4 / IPv6 addresses                 <ip>
  GPU UUIDs (GPU-…, MIG-…)              <gpu-uuid>
  serial numbers (12–20 digits, or after "serial"/"S/N")   <serial>
  container IDs (12 or 64 hex digits)   <container-id>
  home paths (/home/U, /Users/U, /root) and this user's home   ~
  this machine's host names, this user's name, and any extra private strings given   <host> / <user> / <private>
  other fully qualified host names (three labels or more; not in our own dotted names)   <host>

Fields that hold a SHA-256 we computed, or a pinned digest/revision validated by its pattern, are
not text and are left as they are (`HASH_KEYS`).
"""

from __future__ import annotations

import contextlib
import getpass
import ipaddress
import re
import socket
from collections.abc import Iterable
from pathlib import Path
from typing import Any

HASH_KEYS = frozenset({"sha256", "evidence_sha256", "image_digest", "revision", "profile_hash"})
# Dotted names we made ourselves (compose paths, metric and file names): not host names.
DOTTED_KEYS = frozenset({"path", "identity", "file", "metric", "label", "name", "figure", "arm"})
_V6_CANDIDATE = re.compile(r"(?<![\w:.])[0-9A-Fa-f:]*:[0-9A-Fa-f:]*:[0-9A-Fa-f:.]*(?![\w:])")
_HOST_TAIL = re.compile(r"<host>(?:\.[A-Za-z0-9-]+)+")
_FQDN = re.compile(r"(?i)\b[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9-]+)+\.[a-z][a-z-]*[a-z]\b")
_PATTERNS = (
    (
        re.compile(r"\b(?:GPU|MIG)-[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}\b"),
        "<gpu-uuid>",
    ),
    (re.compile(r"(?i)\b(?:serial(?:\s*number)?|s/n)\s*[:=#]?\s*[A-Za-z0-9-]+"), "serial <serial>"),
    (re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}\b"), "<ip>"),
    (re.compile(r"\b[0-9a-f]{64}\b|\b[0-9a-f]{12}\b"), "<container-id>"),
    (re.compile(r"\b\d{12,20}\b"), "<serial>"),
    (re.compile(r"(?:/home|/Users)/[^/\s'\"`:,;)]+"), "~"),
    (re.compile(r"(?<![\w.])/root(?=/|\b)"), "~"),
)


def machine_private() -> dict[str, str]:
    """This machine's own identities: host names, the user's name and home."""
    found: dict[str, str] = {}
    with contextlib.suppress(OSError):
        host = socket.gethostname()
        found[host] = "<host>"
        found[host.split(".")[0]] = "<host>"
        fqdn = socket.getfqdn()
        if fqdn and fqdn not in ("localhost", "localhost.localdomain"):
            found[fqdn] = "<host>"
    with contextlib.suppress(KeyError, OSError):
        found[getpass.getuser()] = "<user>"
    home = str(Path.home())
    if home not in ("/", ""):
        found[home] = "~"
    return {k: v for k, v in found.items() if len(k) >= 3 and k not in ("localhost", "root")}


def _ipv6(m: re.Match[str]) -> str:
    """An IPv6 address (any spelling, an embedded IPv4 too) -> <ip>; anything else as it was."""
    try:
        ipaddress.IPv6Address(m.group(0))
    except ValueError:
        return m.group(0)
    return "<ip>"


class Scrubber:
    def __init__(self, extra: Iterable[str] = ()) -> None:
        literal = machine_private()
        literal.update({s: "<private>" for s in extra if s and len(s) >= 3})
        self.literal = sorted(literal.items(), key=lambda kv: -len(kv[0]))  # longest first
        self.count = 0

    def text(self, value: str, dotted_names: bool = False) -> str:
        out = value
        for needle, replacement in self.literal:
            if needle in out:
                out = out.replace(needle, replacement)
        for pattern, replacement in _PATTERNS:
            out = pattern.sub(replacement, out)
        out = _V6_CANDIDATE.sub(_ipv6, out)
        out = _HOST_TAIL.sub("<host>", out)
        if not dotted_names:
            out = _FQDN.sub(lambda m: m.group(0) if m.group(0).count(".") < 2 else "<host>", out)
        if out != value:
            self.count += 1
        return out

    def json(self, value: Any, key: str | None = None) -> Any:
        if isinstance(value, str):
            return value if key in HASH_KEYS else self.text(value, dotted_names=key in DOTTED_KEYS)
        if isinstance(value, list):
            return [self.json(v, key) for v in value]
        if isinstance(value, dict):
            return {
                self.text(k, True) if isinstance(k, str) else k: self.json(v, k)
                for k, v in value.items()
            }
        return value
