"""What a profile's `identity:` list may mark as identity-only for `diff`: names, ports, labels and
the served name, never anything the stack runs with (image, argv, volumes, devices, environment,
security).

A path is `name`, or `services.<service>.<kind>[.<key>]` with kind one of IDENTITY_KINDS.
`<service>` and `<key>` may be fnmatch globs within their own segment (`services.*.labels.run-*`);
the kind is literal, and `command` only ever means `--served-model-name`. Matching is per segment,
so a glob cannot reach across a dot into another part of the service (a volume target `/x.labels.y`
is not a label). Ports are identity only while the container port is published on both sides (an
added or removed published port changes what the stack exposes)."""

from __future__ import annotations

import fnmatch
import re

IDENTITY_KINDS = ("container_name", "hostname", "ports", "labels", "command")
_SEGMENT = re.compile(r"[A-Za-z0-9_*?.\[\]/-]+")


def problem(pattern: str) -> str | None:
    """Why `pattern` may not be an identity path, or None."""
    if pattern == "name":
        return None
    parts = pattern.split(".", 3)
    if (
        len(parts) < 3
        or parts[0] != "services"
        or not _SEGMENT.fullmatch(parts[1])
        or "." in parts[1]
    ):
        return f"{pattern!r}: identity paths are `name` or services.<service>.<{'|'.join(IDENTITY_KINDS)}>[.<key>]"
    kind = parts[2]
    if kind not in IDENTITY_KINDS:
        return (
            f"{pattern!r}: {kind!r} is what the stack runs with; identity may only hold names, ports, labels "
            "and the served name"
        )
    key = parts[3] if len(parts) == 4 else None
    if kind == "command" and key != "--served-model-name":
        return f"{pattern!r}: of the command only --served-model-name is identity (other flags are functional)"
    if kind in ("container_name", "hostname") and key is not None:
        return f"{pattern!r}: {kind} has no parts"
    if key is not None and not key:
        return f"{pattern!r}: empty key"
    return None


def matches(segments: tuple[str, ...], pattern: str, before: object, after: object) -> bool:
    """True when the differing path `segments` is covered by the (valid) identity `pattern`."""
    if pattern == "name":
        return segments == ("name",)
    parts = pattern.split(".", 3)
    if len(segments) < 3 or segments[0] != "services" or segments[2] != parts[2]:
        return False
    if not fnmatch.fnmatchcase(segments[1], parts[1]):
        return False
    if parts[2] == "ports" and (before is None or after is None):
        return False
    if len(parts) == 3:
        return True
    return len(segments) >= 4 and fnmatch.fnmatchcase(segments[3], parts[3])
