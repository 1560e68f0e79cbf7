"""Standby: stacks that stay resident behind the edge, asleep when they do not serve (vLLM's sleep
mode).

`up NAME --standby` starts the stack, waits for ready, runs its gates, then puts it to sleep
(`asleep`). A switch (`promote`, `rollback`) takes the standby path when both stacks have `standby:`
and the target is up and asleep; otherwise the cold path runs (edge/switch.py). The standby path,
each step told to clients as the 503 stage and timed:

    draining        new requests for the alias are refused (503) while running ones finish, up to
                    DRAIN_S; then the sleep aborts what is left (clients get finish_reason "abort")
    putting OLD to sleep, waking NEW, warm-up (one request), identity (/v1/models names NEW's served
    name), gates on NEW; then the alias moves.

Any failure, Ctrl-C or signal puts the new one back to sleep and the old one awake again (warm-up,
identity, gates), and the alias stays where it was (edge/undo.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from composegen.edge import standbyplan
from composegen.errors import CheckFailed, ComposegenError, EngineError
from composegen.evidence import gatecheck, sleepcycles
from composegen.monitor import watch
from composegen.profiles.resolved import Resolved
from composegen.project import Project
from composegen.stack import driver, readiness

DRAIN_S = 30.0  # running requests get this long to finish before the sleep aborts them


def preload_gates() -> threading.Thread:
    """The gates' client (openai: ~0.2-0.3 s of imports) loaded on a thread while the first steps
    wait on the engines, so `gates on NEW` runs at once after the identity check. Started once the
    plan passed: a refused switch (exit 2) loads nothing."""
    thread = threading.Thread(target=_preload_quietly, name="preload-gates", daemon=True)
    thread.start()
    return thread


def _preload_quietly() -> None:
    """Whatever the preload raises stays in its thread (threading.excepthook would print a
    traceback mid-switch): the gates import the client again when they run, and a failure then is
    theirs to report (_gates)."""
    try:
        gatecheck.preload_gates()
    except BaseException:  # said by the gates, if they need the client at all
        return


def _gates(r: Resolved, only: list[str] | None) -> None:
    """The gates on R; a client that does not import (a broken install) is an EngineError, so the
    switch wakes the old engine again and exits 3 with one line, not a traceback."""
    try:
        gatecheck.require_gates(r, only)
    except ImportError as exc:
        raise EngineError(
            f"{r.name}: the gates' client does not import ({type(exc).__name__}: {exc})",
            hint="`bash scripts/setup.sh` reinstalls the project's environment",
        ) from None


def put_to_sleep(project: Project, r: Resolved, only: list[str] | None = None) -> driver.Asleep:
    """`up --standby` after the stack is ready: its gates, the plan's host-memory check for a
    level-1 sleep (its weights are known now), then sleep at the profile's level."""
    h = (held := driver.handles(project, known={r.name: r})).get(r.name)
    if h is not None and h.asleep is not None:
        return h.asleep  # already: `up --standby` of a sleeping stack changes nothing
    gatecheck.require_gates(r, only)
    standbyplan.check_sleep(project, r, h.ctr if h else None)
    return driver.sleep_stack(project, r, held=held)


def _drained(r: Resolved, deadline: float) -> bool:
    """True once R's engine runs no request (its own num_requests_running gauge), False at the
    deadline."""
    ep = driver.endpoint(r)
    while time.monotonic() < deadline:
        try:
            if not watch.scrape(ep).total("vllm:num_requests_running"):
                return True
        except ComposegenError:
            return False
        time.sleep(0.1)
    return False


Run = Callable[[str, Callable[[], object]], None]  # a named, told, timed step (StageSink.run)


def waking(
    project: Project, r: Resolved, gates: list[str] | None, held: driver.Held = None
) -> list[tuple[str, Callable[[], object]]]:
    """A sleeping engine back in service, as a switch, a wake and an undo do it: each step."""
    return [
        (f"waking {r.name}", lambda: driver.wake_stack(project, r, held)),
        ("warm-up", lambda: sleepcycles.probe(r)),  # the first request after a wake
        ("identity", lambda: identity(r)),
        (f"gates on {r.name}", lambda: _gates(r, gates)),
    ]


def sleep_drained(project: Project, r: Resolved, run: Run, held: driver.Held = None) -> None:
    """R's engine to sleep once its running requests end, or at DRAIN_S with them aborted (the
    alias already answers 503: nothing new arrives). Shared by a switch and `qualify --alias`."""
    drained = [True]
    run("draining", lambda: drained.__setitem__(0, _drained(r, time.monotonic() + DRAIN_S)))
    mode = lambda: "wait" if drained[0] else "abort"  # noqa: E731
    run(f"putting {r.name} to sleep", lambda: driver.sleep_stack(project, r, None, mode(), held))


def identity(r: Resolved) -> None:
    """R's engine answers as R (/v1/models names its served name), not another one on its port."""
    served = r.profile.model.served_name
    if readiness.models_entry(driver.endpoint(r), served) is None:
        msg = f"{r.name}: /v1/models does not list {served}: another engine answers there"
        raise CheckFailed(msg)
