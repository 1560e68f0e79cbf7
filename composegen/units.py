"""Unit tables and parsers shared by profile checks, argv building and diff (one place, one
meaning).

vLLM's human-readable ints are decimal in lower case and binary in upper case (`4k` = 4000, `4K` =
4096); compose and Docker byte values (`shm_size: 32gb`) are binary whatever the case.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

GIB = 2**30
HUMAN_INT_UNITS = {
    "": 1,
    "k": 10**3,
    "m": 10**6,
    "g": 10**9,
    "t": 10**12,
    "K": 2**10,
    "M": 2**20,
    "G": 2**30,
    "T": 2**40,
}
BYTE_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40, "p": 2**50}

_HUMAN_INT = re.compile(r"\s*(-?\d+(?:\.\d+)?)([kmgtKMGT]?)\s*")
_BYTES = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(?:i?b)?\s*", re.IGNORECASE)


def parse_human_int(text: str) -> int | None:
    """`4096`, `4k`, `4K`, `1.5M` → int; None when it is not such a number or not a whole one."""
    match = _HUMAN_INT.fullmatch(text)
    if not match:
        return None
    try:
        value = Decimal(match[1]) * HUMAN_INT_UNITS[match[2]]
    except InvalidOperation:
        return None
    return int(value) if value == value.to_integral_value() else None


def parse_bytes(text: str) -> int | None:
    """`32gb`, `16g`, `512MiB`, `1024` → bytes (binary units); None when it is not a size."""
    match = _BYTES.fullmatch(str(text))
    if not match:
        return None
    return int(Decimal(match[1]) * BYTE_UNITS[match[2].lower()])


# Go / compose durations (`1m30s`, `500ms`, `250us`, `250µs`): the one table every caller uses.
DURATION_UNITS = {
    "ns": Decimal("1e-9"),
    "us": Decimal("1e-6"),
    "µs": Decimal("1e-6"),  # U+00B5 MICRO SIGN, as Go writes it
    "μs": Decimal("1e-6"),  # U+03BC GREEK SMALL LETTER MU, which Go also accepts
    "ms": Decimal("0.001"),
    "s": Decimal(1),
    "m": Decimal(60),
    "h": Decimal(3600),
}
DURATION_PATTERN = r"(?:\d+(?:\.\d+)?(?:ns|us|µs|μs|ms|s|m|h))+"
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration(text: str) -> Decimal | None:
    """`1m30s` → Decimal('90'); None when the whole text is not a duration."""
    text = str(text).strip()
    if not re.fullmatch(DURATION_PATTERN, text):
        return None
    return sum(
        (Decimal(n) * DURATION_UNITS[u] for n, u in _DURATION_PART.findall(text)), Decimal(0)
    )


def format_gib(gib: float | None, digits: int = 2, signed: bool = False) -> str:
    """A GiB size as printed everywhere: `41.67 GiB` (`+0.59 GiB` signed); `n/a` if unknown."""
    return "n/a" if gib is None else f"{gib:{'+' if signed else ''}.{digits}f} GiB"


def format_bytes(n: float) -> str:
    """A byte count in binary units: `512 B`, `4.0 MiB`, `41.7 GiB`."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"
