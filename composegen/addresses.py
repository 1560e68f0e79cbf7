"""What counts as this host: loopback is all of 127.0.0.0/8, ::1 and `localhost`, spelled any
way."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit


def is_loopback(host: str | None) -> bool:
    if not host:
        return False
    text = host.strip().strip("[]").lower()
    if text == "localhost" or text.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(text).is_loopback
    except ValueError:
        return False


def url_is_local(url: str | None) -> bool:
    """A DOCKER_HOST-style URL reaching an engine on this machine (none: the default engine)."""
    if not url or url.startswith(("unix://", "npipe://", "fd://")):
        return True
    parts = urlsplit(url)
    return parts.scheme == "tcp" and is_loopback(parts.hostname)
