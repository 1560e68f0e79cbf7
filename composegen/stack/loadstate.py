"""A stack that is still starting: where its load is, read from the engine's own log.

`status` shows it instead of "unhealthy" while the engine loads inside its start period (the
healthcheck's start_period is startup_timeout); the commands that need a ready engine (gate,
startup, ladder, evidence...) say "NAME is still loading: <stage>" (exit 3) instead of failing."""

from __future__ import annotations

import time

from composegen.errors import EngineError
from composegen.stack import engine, readiness
from composegen.stack.facts import ContainerFacts, stamped_line
from composegen.stack.reports import LoadingStatus
from composegen.vllm import stages


def stamped(text: str) -> list[tuple[float | None, str]]:
    """`docker logs --timestamps` text as (epoch seconds, line) pairs."""
    return [stamped_line(line) for line in text.splitlines()]


def read_stages(ctr: ContainerFacts, startup_timeout: float | None) -> stages.StageTracker:
    """The stages of the container's start so far, timed by Docker's own log timestamps."""
    started = ctr.started_at or time.time()
    tracker = stages.StageTracker(started, startup_timeout)
    # the container's start: the imports before vLLM's first line count from there
    if ctr.started_at:
        tracker.launched(ctr.started_at)
    for at, line in stamped(engine.logs(ctr, timestamps=True)):
        tracker.feed(line, at if at is not None else started)
    return tracker


def loading_state(
    ctr: ContainerFacts, healthy: bool | None, startup_timeout: float | None
) -> LoadingStatus | None:
    """Where a running container not answering yet is in its start (`status` → endpoint.loading)."""
    if not ctr.running or healthy:
        return None
    tracker = read_stages(ctr, startup_timeout)
    now = time.time()
    stage = tracker.current
    left = tracker.time_left(now)
    return LoadingStatus(
        stage=stage.key if stage else None,
        label=stage.label if stage else None,
        summary=tracker.summary(),
        done=stage.done if stage else None,
        total=stage.total if stage else None,
        elapsed_s=round(now - tracker.started_at, 1),
        in_start_period=left is None or left > 0,
        failed=tracker.failed,
    )


def still_loading(state: LoadingStatus | None) -> bool:
    """Loading and expected to: inside the start period, no failure logged, not yet ready."""
    if state is None:
        return False
    return state.in_start_period and not state.failed and state.stage != "ready"


def wait_hint(name: str) -> str:
    return f"`composegen wait {name}` shows the load and returns when the stack is ready"


def raise_if_loading(
    name: str, ctr: ContainerFacts, ep: readiness.Endpoint, startup_timeout: float | None
) -> None:
    """EngineError "NAME is still loading: <stage>" when it does not answer yet but loads."""
    if readiness.health_ok(ep):
        return
    state = loading_state(ctr, False, startup_timeout)
    if state is not None and still_loading(state):
        raise EngineError(f"{name} is still loading: {state.summary}", hint=wait_hint(name))


def api_text(healthy: bool | None, served_name: str | None, loading: LoadingStatus | None) -> str:
    """`status`'s API column: our own readiness, while loading the stage; never "unhealthy"."""
    if healthy:
        return "ready" if served_name else "health 200"
    if healthy is None:
        return "down"
    if loading is not None and still_loading(loading):
        return f"loading: {loading.summary}"
    if loading is not None and loading.failed:
        return "failed"
    return "unhealthy"


def health_text(docker_health: str | None, ready: bool) -> str:
    """Docker's health beside ours: its check runs every 30 s ("starting" long after the API)."""
    if docker_health == "starting" and ready:
        return "ready (docker's check pending)"
    return docker_health or "-"


def up_hint(name: str, emulated: bool) -> str:
    return f"`composegen up {name}{' --emulate' if emulated else ''}`"


class AlreadyRunning(EngineError):
    """`up` of a stack whose head runs. `ready`: the caller shows the running stack's summary (exit
    0); else it is starting (hint: `composegen wait`) or runs without answering (exit 3)."""

    def __init__(self, message: str, *, ready: bool, hint: str, starting: bool = False) -> None:
        super().__init__(message, hint=hint)
        self.ready, self.starting = ready, starting


def refuse_running(
    name: str,
    ctr: ContainerFacts,
    ep: readiness.Endpoint,
    served_name: str,
    startup_timeout: float | None,
) -> None:
    """Raise AlreadyRunning saying what the stack is doing: ready, starting (its stage), silent."""
    healthy = readiness.health_ok(ep)
    if healthy and readiness.models_entry(ep, served_name) is not None:
        ready = f"{name} is already running and ready"
        raise AlreadyRunning(ready, ready=True, hint=f"`composegen status {name}`")
    state = loading_state(ctr, healthy, startup_timeout)
    if state is not None and still_loading(state):
        starting = f"{name} is already starting: {state.summary}"
        raise AlreadyRunning(starting, ready=False, hint=wait_hint(name), starting=True)
    why = f": {state.failed}" if state and state.failed else ""
    silent = f"{name} is already running ({ctr.name}) but its API does not answer{why}"
    hint = f"`composegen logs {name}`; `composegen down {name}` before starting it again"
    raise AlreadyRunning(silent, ready=False, hint=hint)
