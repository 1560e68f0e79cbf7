"""Read a log as a bounded stream of text lines: constant memory whatever the input (a pipe,
/dev/zero, 1 GB); the limits in docs/startup.md. Lines come without their end-of-line characters
(`\\n`, and a lone `\\r` as `str.splitlines` splits it: progress bars redraw with `\\r`); each limit
hit adds one sentence to `limits.warnings` (read it after the iteration)."""

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
    yield from _stream_blocks(source, limits)


def _chunks(source: BinaryIO, limits: Limits) -> Iterator[bytes | None]:
    """The source's chunks, then None when reading stopped at a limit (the unfinished line is then
    dropped). The total is checked only after a chunk that ends a line."""
    since_newline = 0
    while chunk := source.read(CHUNK):
        limits.bytes_read += len(chunk)
        newline = chunk.rfind(b"\n")
        since_newline = since_newline + len(chunk) if newline < 0 else len(chunk) - newline - 1
        if since_newline >= limits.max_bytes_without_newline:
            shown = format_bytes(since_newline)
            limits.warnings.append(
                f"stopped reading: {shown} without a line break (not a text log?)"
            )
            yield None
            return
        yield chunk
        if newline >= 0 and limits.bytes_read >= limits.max_total_bytes:
            limits.warnings.append(
                f"stopped reading after {format_bytes(limits.bytes_read)} (the limit)"
            )
            yield None
            return


@dataclass
class _Carry:
    """The unfinished last line of the previous chunk; an over-long one is cut, and the rest of it
    skipped up to its line break."""

    limits: Limits
    data: bytes = b""
    skipping: bool = False
    cut_lines: int = 0

    def cut(self) -> list[str]:
        """The cut line when the carry outgrew a line, else nothing."""
        if len(self.data) <= self.limits.max_line_bytes:
            return []
        text = _text(self.data[: self.limits.max_line_bytes], self.limits)[0]
        self.data, self.skipping, self.cut_lines = b"", True, self.cut_lines + 1
        return [text]


def _stream_blocks(source: BinaryIO, limits: Limits) -> Iterator[str]:
    carry = _Carry(limits)
    for chunk in _chunks(source, limits):
        if chunk is None:
            carry.data = b""
            break
        newline = chunk.rfind(b"\n")
        if newline < 0:
            if not carry.skipping:
                carry.data += chunk
                yield from carry.cut()
            continue
        data: bytes | None = carry.data + chunk[:newline]
        if carry.skipping:
            start = chunk.index(b"\n") + 1  # the rest of the over-long line ends here
            data = chunk[start:newline] if start <= newline else None
            carry.skipping = False
        carry.data = chunk[newline + 1 :]
        if data is not None:
            text, cut = _text(data, limits)
            carry.cut_lines += cut
            yield text
        yield from carry.cut()
    if carry.data and not carry.skipping:
        yield _text(carry.data, limits)[0]
    if carry.cut_lines:
        limits.warnings.append(
            f"{carry.cut_lines} line(s) longer than {format_bytes(limits.max_line_bytes)} were cut to that length"
        )
