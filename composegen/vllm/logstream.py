"""Read a log as a bounded stream of text lines: constant memory whatever the input (a pipe,
/dev/zero, 1 GB).

`read_lines(source, limits) -> Iterator[str]` yields decoded lines without their end-of-line
characters (`\\n`, and a lone `\\r` as `str.splitlines` splits it: progress bars redraw with `\\r`).
Limits, and what happens when one is hit (each adds one sentence to `limits.warnings`, read it after
the iteration):
  - a line longer than `max_line_bytes` is cut there; the rest of that line is skipped, not held;
  - `max_bytes_without_newline` bytes with no newline at all (a binary file, /dev/zero) stop the read;
  - `max_total_bytes` read in all stop the read.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from composegen.units import format_bytes

CHUNK = 256 << 10
_OTHER_BREAKS = re.compile(r"[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


@dataclass
class Limits:
    max_line_bytes: int = 1 << 20
    max_bytes_without_newline: int = 16 << 20
    max_total_bytes: int = 4 << 30
    warnings: list[str] = field(default_factory=list)
    bytes_read: int = 0


def _text(data: bytes, limits: Limits) -> tuple[str, int]:
    """Whole lines of `data` (which ends at a line break) decoded at once and joined by "\\n";
    over-long lines cut. Returns (text, how many lines were cut)."""
    text = data.decode("utf-8", errors="replace")
    if _OTHER_BREAKS.search(text):
        text = "\n".join(text.splitlines())  # blank lines may go: they carry nothing
    if len(text) <= limits.max_line_bytes:
        return text, 0
    lines = text.split("\n")
    long = [n for n, line in enumerate(lines) if len(line) > limits.max_line_bytes]
    for n in long:
        lines[n] = lines[n][: limits.max_line_bytes]
    return ("\n".join(lines) if long else text), len(long)


def read_lines(source: BinaryIO | str | bytes, limits: Limits | None = None) -> Iterator[str]:
    for block in read_blocks(source, limits):
        yield from block.split("\n")


def read_blocks(source: BinaryIO | str | bytes, limits: Limits | None = None) -> Iterator[str]:
    """The input as blocks of whole lines, each joined by "\\n" (no line break at the end of a
    block)."""
    limits = limits if limits is not None else Limits()
    if isinstance(source, (str, bytes)):
        text = source if isinstance(source, str) else source.decode("utf-8", errors="replace")
        lines = text.splitlines()
        if lines:
            yield "\n".join(lines)
        return
    carry = b""  # the unfinished last line of the previous chunk
    cut_lines = 0
    skipping = False  # inside an over-long line: drop bytes until its line break
    since_newline = 0
    while True:
        chunk = source.read(CHUNK)
        if not chunk:
            break
        limits.bytes_read += len(chunk)
        newline = chunk.rfind(b"\n")
        since_newline = since_newline + len(chunk) if newline < 0 else len(chunk) - newline - 1
        if since_newline >= limits.max_bytes_without_newline:
            shown = format_bytes(since_newline)
            limits.warnings.append(
                f"stopped reading: {shown} without a line break (not a text log?)"
            )
            carry = b""
            break
        if newline < 0:
            if not skipping:
                carry += chunk
                if len(carry) > limits.max_line_bytes:
                    yield _text(carry[: limits.max_line_bytes], limits)[0]
                    carry, skipping, cut_lines = b"", True, cut_lines + 1
            continue
        data: bytes | None = carry + chunk[:newline]
        if skipping:
            start = chunk.index(b"\n") + 1  # the rest of the over-long line ends here
            data = chunk[start:newline] if start <= newline else None
            skipping = False
        carry = chunk[newline + 1 :]
        if data is not None:
            text, cut = _text(data, limits)
            cut_lines += cut
            yield text
        if len(carry) > limits.max_line_bytes:
            yield _text(carry[: limits.max_line_bytes], limits)[0]
            carry, skipping, cut_lines = b"", True, cut_lines + 1
        if limits.bytes_read >= limits.max_total_bytes:
            limits.warnings.append(
                f"stopped reading after {format_bytes(limits.bytes_read)} (the limit)"
            )
            carry = b""
            break
    if carry and not skipping:
        yield _text(carry, limits)[0]
    if cut_lines:
        limits.warnings.append(
            f"{cut_lines} line(s) longer than {format_bytes(limits.max_line_bytes)} were cut to that length"
        )
