"""`reclaim(…, yes=True)` for tests that expect it to go ahead.

The reclaim refuses, machine-wide and rightly, while any process may have file descriptors in flight
(a unix socket with queued data, an io_uring ring): another test worker talking to the engine can be one
for a moment. A user runs it again, as the refusal's hint says; so do these tests, for a bounded time.
Tests that expect the refusal call `reclaim` itself.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from typing import Any

from composegen.errors import CheckFailed
from composegen.shm import reclaim
from composegen.shm.reports import ShmReclaim

HIDDEN = "may hold files /proc cannot show"


def settled_reclaim(path: str, within_s: float = 15.0, **options: Any) -> ShmReclaim:
    deadline = time.monotonic() + within_s
    while True:
        try:
            return reclaim.reclaim(path, **options)
        except CheckFailed as exc:
            if HIDDEN not in exc.message or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def settled_apply(plan: Any, within_s: float = 15.0, **options: Any) -> ShmReclaim:
    """`apply_plan(PLAN, …)`, run again (bounded) while it refuses for fds in flight (it removed
    nothing then)."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            return reclaim.apply_plan(plan, **options)
        except CheckFailed as exc:
            if HIDDEN not in exc.message or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def settled_cli(
    run: Callable[..., subprocess.CompletedProcess], *args: str, within_s: float = 15.0
) -> Any:
    """`composegen shm reclaim --yes …` through RUN, run again (bounded) while it exits 1 on that refusal."""
    deadline = time.monotonic() + within_s
    while True:
        res = run(*args)
        if res.returncode != 1 or HIDDEN not in res.stderr or time.monotonic() > deadline:
            return res
        time.sleep(0.2)
