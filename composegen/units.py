"""Unit tables and parsers shared by profile checks, argv building and diff (one place, one meaning).

vLLM's human-readable ints are decimal in lower case and binary in upper case (`4k` = 4000, `4K` = 4096);
compose and Docker byte values (`shm_size: 32gb`) are binary whatever the case.
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
