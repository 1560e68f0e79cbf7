"""One file's transfer under a budget: a total deadline and a size cap (docs/weights.md).

huggingface_hub's `http_get` has per-read timeouts only, so a server that drips one byte every few
seconds, or streams for ever, would hold `weights --download` without end, and one that sends more
than it announced would fill the disk. A transfer that breaks its `Budget` is a runtime failure
(exit 3) and its partial file is removed: the bytes of a server that lied are not worth resuming."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO

from composegen.errors import BadInput

DEFAULT_MAX_BYTES = 64 * 2**30
BASE_DEADLINE_S = 120.0
MIN_RATE = 2**20  # bytes per second a download must average to finish within its default deadline


class OverBudget(Exception):
    """The transfer broke its budget; the message says how."""


@dataclass(frozen=True)
class Budget:
    cap: int  # bytes the finished file may hold
    deadline_s: float
    cap_known: bool  # the cap is the file's expected size (not the configured ceiling)


def _env_number(name: str, low: float, high: float) -> float | None:
    raw = os.environ.get(name, "")
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise BadInput(f"{name}: expected a number, got {raw[:40]!r}") from None
    if not low < value < high:  # also refuses nan and inf
        raise BadInput(f"{name}: expected {low:g} < value < {high:g}, got {raw[:40]!r}")
    return value


def budget_for(expected: int | None) -> Budget:
    ceiling = _env_number("COMPOSEGEN_DOWNLOAD_MAX_BYTES", 0, 2**50)
    cap = expected if expected is not None else int(ceiling or DEFAULT_MAX_BYTES)
    deadline = _env_number("COMPOSEGEN_DOWNLOAD_DEADLINE_S", 0, 10**7)
    return Budget(cap, deadline or BASE_DEADLINE_S + cap / MIN_RATE, expected is not None)


class CappedFile:
    """The partial file as `http_get` sees it: a write past the cap or the deadline raises."""

    def __init__(self, fh: BinaryIO, budget: Budget):
        self._fh, self._budget = fh, budget
        self.stopped: str | None = None  # set by the watcher when the deadline passes

    def write(self, data: bytes) -> int:
        if self.stopped is not None:
            raise OverBudget(self.stopped)
        if self._fh.tell() + len(data) > self._budget.cap:
            said = (
                "the expected size" if self._budget.cap_known else "COMPOSEGEN_DOWNLOAD_MAX_BYTES"
            )
            self.stopped = f"sent more than {self._budget.cap} bytes ({said})"
            raise OverBudget(self.stopped)
        return self._fh.write(data)

    def __getattr__(self, name: str) -> Any:  # tell, seek, truncate, flush: the real file's
        return getattr(self._fh, name)


def run(fetch: Callable[[CappedFile], None], fh: BinaryIO, budget: Budget) -> None:
    """`fetch(capped)` in a daemon thread, joined for at most the deadline. Raises OverBudget on a
    broken budget; any other failure of `fetch` is raised as it is. Past the deadline the thread is
    left to the process's end, and its next write raises, so nothing more reaches the file."""
    capped = CappedFile(fh, budget)
    box: dict[str, BaseException] = {}

    def work() -> None:
        try:
            fetch(capped)
        except BaseException as exc:  # handed to the caller
            box["error"] = exc

    worker = threading.Thread(target=work, name="weights download", daemon=True)
    worker.start()
    worker.join(budget.deadline_s)
    if worker.is_alive():
        capped.stopped = f"did not finish within {budget.deadline_s:g} s"
        raise OverBudget(capped.stopped)
    error = box.get("error")
    if capped.stopped is not None:  # http_get may wrap the write's error in its own
        raise OverBudget(capped.stopped)
    if error is not None:
        raise error
