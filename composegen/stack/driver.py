"""The deployment seam: every command that drives a stack calls these, and nothing else in stack/
(the room's door, with reports, progress and readiness: composegen/stack/__init__.py).

A profile's deployment is chosen once (placement.deployment): a single-node profile is the one-node
case of the same algorithms as a multi-node one. Progress goes to a `progress.ProgressSink`.

up/down/status/wait/logs, /dev/shm, weights, GPU claims and sleep mode are here, or re-exported
(running.py: the head container, its logs, what it really is). Rooms running containers of their
own (provision: the base image; edge: its proxy stack) use the engine names re-exported here.
Only commands that need the engine import this module (render/diff/validate never do)."""

from __future__ import annotations

import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from composegen.errors import BadInput, EngineError
from composegen.profiles.resolved import Resolved
from composegen.project import Project
from composegen.shm import scan
from composegen.shm.procscan import LabelResolver
from composegen.shm.reports import ShmScan
from composegen.stack import compose, engine, placement, readiness, sleepmode
from composegen.stack import down as teardown
from composegen.stack import status as stack_state
from composegen.stack import up as starting
from composegen.stack.caches import cache_export, cache_import, cache_prune, cache_volumes, filled
from composegen.stack.compose import Stack, compose_version
from composegen.stack.engine import (
    BASE_IMAGE,
    build_image,
    engine_info,
    exec_output,
    image_facts,
    image_present,
    project_containers,
)
from composegen.stack.facts import ContainerFacts, ImageFacts
from composegen.stack.loadstate import AlreadyRunning
from composegen.stack.memfacts import gpu_memory, host_memory
from composegen.stack.placement import Deployment, NodeRef, deployment
from composegen.stack.preflight import loopback_conflict
from composegen.stack.prepare import PreflightFailed, UpOptions
from composegen.stack.progress import ProgressSink
from composegen.stack.reports import DownReport, NodesShm, StatusReport, UpReport
from composegen.stack.running import (
    container_log,
    follow_logs,
    head_container,
    live_identity,
    logs_text,
    running_container,
)
from composegen.stack.sleepmode import Asleep, Handle, Held, gpu_size, handles, residue_kept, share
from composegen.stack.status import format_text as status_text
from composegen.stack.up import checked_startup, startup_check
from composegen.weights.reports import WeightsReport

__all__ = [
    "BASE_IMAGE",
    "Asleep",
    "ContainerFacts",
    "Deployment",
    "Handle",
    "Held",
    "ImageFacts",
    "NodeRef",
    "Stack",
    "UpOptions",
    "attach",
    "build_image",
    "cache_export",
    "cache_import",
    "cache_prune",
    "cache_volumes",
    "cache_warm",
    "checked_startup",
    "compose_version",
    "container_log",
    "container_shm",
    "deployment",
    "down",
    "endpoint",
    "engine_info",
    "exec_output",
    "filled",
    "follow_logs",
    "gpu_claims",
    "gpu_memory",
    "gpu_size",
    "handles",
    "head_container",
    "host_memory",
    "image_facts",
    "image_present",
    "live_identity",
    "logs_text",
    "loopback_conflict",
    "preload",
    "project_containers",
    "residue_kept",
    "running_container",
    "settle",
    "share",
    "shm_report",
    "shm_text",
    "signals_as_interrupts",
    "sleep_stack",
    "sleep_state",
    "start",
    "startup_check",
    "status",
    "status_text",
    "up",
    "up_or_attach",
    "wake_stack",
    "weights",
]


signals_as_interrupts = starting.signals_as_interrupts  # SIGTERM/SIGHUP raised as Ctrl-C is


def preload() -> None:
    """Load what driving a stack imports lazily (the docker libraries, the startup parser) now."""
    engine.preload()


def up(
    project: Project, r: Resolved, opts: UpOptions, sink: ProgressSink | None = None
) -> UpReport:
    return starting.up(deployment(project, r), opts, sink or ProgressSink())


def start(
    project: Project, r: Resolved, opts: UpOptions, sink: ProgressSink, timeout: float | None = None
) -> UpReport | str:
    """`up` as a person means it: a stack that is already starting is followed as `wait` does (or,
    with opts.wait off, the str to say instead), a ready one is summarised (exit 0). A failed
    preflight the sink has shown line by line (`sink.shows_checks`) ends in one error naming the
    checks."""
    try:
        return up(project, r, opts, sink)
    except AlreadyRunning as exc:
        if exc.starting and not opts.wait:
            return f"{exc.message}; `composegen wait {r.name}` follows it"
        # after a Ctrl-C, or a second `up`: follow the load as `wait` does (0 when ready)
        following = f"following it as `composegen wait {r.name}` does"
        how = following if exc.starting else "its summary follows"
        followed = _follow(project, r, exc, sink, timeout, how)
        if followed is None:
            raise
        return followed
    except PreflightFailed as exc:
        if sink.shows_checks:  # each reason is printed above
            raise EngineError(
                f"preflight failed: {', '.join(exc.failed)} (the FAIL lines above say why)"
            ) from None
        raise


def cache_warm(project: Project, r: Resolved, opts: UpOptions, sink: ProgressSink) -> UpReport:
    """`cache warm`: up (removed again on a failure), then down; the cache volume keeps the rest."""
    opts.down_on_failure = True
    report = up(project, r, opts, sink)
    down(project, r)
    return report


def up_or_attach(
    project: Project,
    r: Resolved,
    opts: UpOptions,
    sink: ProgressSink | None = None,
    timeout: float | None = None,
) -> tuple[UpReport, str | None]:
    """`up` for a caller that may have started this stack before (a campaign arm after Ctrl-C, the
    edge's recovery): a stack still starting is followed (its load goes on: nothing is loaded
    twice), a ready one summarised; one that runs without answering is taken down and started
    again. With the report: why it attached (None: started here, or started again)."""
    sink = sink or ProgressSink()
    try:
        return up(project, r, opts, sink), None
    except AlreadyRunning as exc:
        followed = _follow(project, r, exc, sink, timeout, "attaching")
        if followed is not None:
            return followed, exc.message
        sink.note(f"{exc.message}; taking it down to start it again")
        down(project, r)
        return up(project, r, opts, sink), None


def _follow(
    project: Project,
    r: Resolved,
    exc: AlreadyRunning,
    sink: ProgressSink,
    timeout: float | None,
    how: str,
) -> UpReport | None:
    """The one decision "already running, so attach": a stack still starting is followed, a ready
    one summarised (its time to ready from its own log); None for one that does not answer."""
    if not (exc.starting or exc.ready):
        return None
    sink.note(f"{exc.message}{': ' if exc.ready and not exc.starting else '; '}{how}")
    if exc.starting:
        return attach(project, r, sink, timeout)
    return attach(project, r, sink, ready_before=True)  # exit 0


def attach(
    project: Project,
    r: Resolved,
    sink: ProgressSink | None = None,
    timeout: float | None = None,
    *,
    ready_before: bool = False,
) -> UpReport:
    return starting.attach(
        deployment(project, r), sink or ProgressSink(), timeout, ready_before=ready_before
    )


def down(project: Project, r: Resolved, timeout: int | None = None) -> DownReport:
    report = teardown.down(deployment(project, r), timeout)
    if r.profile.nodes is not None:
        report.shm = _nodeshm().node_shm_report(r)
    elif r.profile.service.ipc == "host":
        report.shm = scan.scan("/dev/shm", container_labels=engine.label_lookup())
    return report


def shm_text(report: DownReport) -> str | None:
    """The /dev/shm part of `down`'s text: a block per node, or the host's scan; None if none."""
    if report.shm is None:
        return None
    if isinstance(report.shm, NodesShm):
        return _nodeshm().format_node_shm_text(report.shm)
    return scan.format_after_down(report.shm)


def status(project: Project, name: str | None = None, every: bool = False) -> StatusReport:
    return stack_state.stack_status(project, name, every)


def endpoint(r: Resolved) -> readiness.Endpoint:
    return placement.endpoint(r)


def gpu_claims(r: Resolved) -> list[tuple[placement.NodeRef, list[dict[str, Any]]]]:
    """Per node: what every running container on its engine asks of the GPUs (engine.gpu_claims)."""
    return [(n, engine.gpu_claims(n.target)) for n in placement.nodes(r)]


def shm_report(r: Resolved) -> tuple[NodesShm, str]:
    """/dev/shm of every node of a multi-node profile, and its text; BadInput for one node."""
    if r.profile.nodes is None:
        raise BadInput(
            f"--profile {r.name}: not a multi-node profile; inspect its host with plain `composegen shm`"
        )
    nodeshm = _nodeshm()
    report = nodeshm.node_shm_report(r)
    return report, nodeshm.format_node_shm_text(report)


def container_shm(container: str, labels: LabelResolver | None = None) -> ShmScan:
    """A running container's private /dev/shm (shm.scan's report), read through the engine."""
    return scan.container_shm(container, inspect=engine.shm_facts, container_labels=labels)


def weights(
    project: Project,
    r: Resolved,
    *,
    download: bool = False,
    verify: bool = False,
    sync: bool = False,
    on_file: Callable[[str], None] = lambda name: None,
) -> WeightsReport:
    """The pinned weights where the head looks for them (downloaded, hash-checked on request), then
    every other node's copy (after `sync` copied the head's to those lacking it); see nodecache."""
    from composegen.stack import nodecache  # why: other hosts' weights, not every command's start

    return nodecache.weights_everywhere(
        project, r, download=download, verify=verify, sync=sync, on_file=on_file
    )


def _nodeshm() -> ModuleType:
    # why: other hosts' /dev/shm, multi-node only: ~30 ms at every start of a switch or an up
    from composegen.stack import nodeshm

    return nodeshm


def _standby_level(r: Resolved) -> int:
    if r.profile.standby is None:
        raise BadInput(
            f"{r.name}: no `standby:` in its profile: it has no sleep mode (composegen docs standby)"
        )
    return r.profile.standby.level


def sleep_stack(
    project: Project, r: Resolved, level: int | None = None, mode: str = "wait", held: Held = None
) -> sleepmode.Asleep:
    """Put R's engine to sleep (its profile's level unless LEVEL); mode wait lets requests end.
    HELD: the switch's handles (R's container and the others as looked up when it began)."""
    planned = _standby_level(r)
    h = (held or {}).get(r.name) or Handle(r, running_container(project, r), None)
    return sleepmode.sleep(project, h, level or planned, mode, held)


def wake_stack(project: Project, r: Resolved, held: Held = None) -> float:
    """Wake R's engine from the sleep anyone put it in; seconds (0: awake already). HELD: the
    switch's handles (R's asked strictly when it began), else looked up now."""
    _standby_level(r)
    h = (held or {}).get(r.name) or handles(project, [r.name], {r.name: r}, r.name).get(r.name)
    if h is None:
        raise EngineError(
            f"{r.name} is not running", hint=f"`composegen up {r.name} --standby` first"
        )
    return 0.0 if h.asleep is None else sleepmode.wake(project, r, h.ctr, h.asleep.level)


def sleep_state(project: Project, r: Resolved, strict: bool = False) -> sleepmode.Asleep | None:
    """R's engine asleep (level, since, GPU memory it holds), or None: awake, not running, or no
    sleep mode. STRICT: an engine that does not say is an EngineError, not "awake"."""
    h = handles(project, [r.name] if strict else [], {r.name: r}, r.name).get(r.name)
    return h.asleep if h else None


def settle(project: Project, r: Resolved, timeout: float = 120.0) -> None:
    """Wait (bounded) until no compose command of R's stack runs here: a killed composegen's
    `docker compose down` or `up` finishes before another one acts on the same stack."""
    deadline = time.monotonic() + timeout
    names = [n.project for n in placement.nodes(r)]
    while any(compose.commands_running(name) for name in names) and time.monotonic() < deadline:
        time.sleep(0.2)
