"""Python's cyclic garbage collector, kept out of the way of an open-loop level's sends.

Left to itself, CPython collects whenever enough objects were allocated, in the middle of whatever
runs then: measured against bench/instant_server.py (docs/benchmarks.md), a level saw a full
collection of 15–25 ms (every object the process holds: numpy, pydantic, the prompts) and young ones
of up to 0.6 ms and 1.5 ms, each delaying any send due meanwhile. During a level the objects that
existed before it are frozen (never scanned again until it ends), automatic collection is off, and
the sender collects the young generations itself when the next send is far enough away. A level
too dense for such gaps still collects once the young generation is far past its usual size, so
cyclic garbage stays bounded. Objects frozen before the level (by its caller) stay frozen after
it: only what the level froze is unfrozen.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG_EVERY = 700  # allocations between two young collections (CPython's threshold0)
MIDDLE_EVERY = 10  # young collections between two middle ones (CPython's threshold1)
GAP_S = 0.003  # room a collection needs before the next send (the middle one took up to 1.5 ms)
CEILING = 50 * YOUNG_EVERY  # collect anyway past this: the level's garbage stays bounded
# Python 3.14's collector is incremental: two generations, gc.collect(1) is "young plus an increment
# of the old one" and get_count()'s middle figure no longer counts young collections, so the
# young-then-middle policy below (measured on 3.11-3.13) means nothing there. On 3.14+ each
# collection the sender makes is a full one: with everything from before the level frozen it scans
# only the level's own objects (not re-measured on 3.14).
INCREMENTAL = sys.version_info >= (3, 14)


class GapCollector:
    """Collects the young generations when the sender has room."""

    def __init__(self) -> None:
        self.collections = 0

    def maybe_collect(self, room_s: float) -> None:
        """`room_s`: seconds until the sender's next wake-up."""
        young, middle, _ = gc.get_count()
        if young < YOUNG_EVERY or (room_s < GAP_S and young < CEILING):
            return
        if INCREMENTAL:
            gc.collect()
        else:
            gc.collect(1 if middle >= MIDDLE_EVERY else 0)
        self.collections += 1


@contextmanager
def between_sends() -> Iterator[GapCollector]:
    """Freeze what exists, switch automatic collection off; both undone when the level ends.
    gc.unfreeze() thaws every frozen object and there is no partial thaw, so when something is
    frozen already (a caller's own gc.freeze(), an enclosing level) this level freezes nothing and
    thaws nothing: objects made since that freeze are scanned, but nobody's frozen set is undone."""
    enabled = gc.isenabled()
    freezes = gc.get_freeze_count() == 0
    if freezes:
        gc.freeze()
    gc.disable()
    try:
        yield GapCollector()
    finally:
        if freezes:
            gc.unfreeze()
        if enabled:
            gc.enable()
