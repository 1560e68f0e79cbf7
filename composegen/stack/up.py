"""`up` of a deployment (every node; one for a single-node profile): under the profile's lock,
prepare (prepare.py), `docker compose up` on the workers then the head, wait for ready (watch.py),
and summarise from the head's own startup log. A failure names the node and shows its last log
lines; with --down-on-failure only the containers THIS run started are removed. Ctrl-C at any moment
exits 130 and says what the run left and how to stop it (`Run.interrupted`); SIGTERM and SIGHUP (a
closed terminal, a service manager stopping the job) say the same and exit 143 and 129."""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

from composegen import privatestate
from composegen.errors import ComposegenError, EngineError, Interrupted
from composegen.profiles.resolved import Resolved
from composegen.stack import caches, engine, enginecache, memguard, nodecache, readiness, watch
from composegen.stack.facts import ContainerFacts
from composegen.stack.placement import Deployment, NodeRef
from composegen.stack.prepare import UpOptions, prepare
from composegen.stack.progress import ProgressSink
from composegen.stack.reports import NodeInfo, PhaseTime, UpReport
from composegen.units import parse_duration
from composegen.vllm import startup
from composegen.vllm.startup import Mismatch, StartupCheck, StartupReport

TAIL_ON_FAILURE = 80


class Run:
    """One `up`: the phase it is in and the containers it started, so that a failure or an interrupt
    removes or reports exactly what this run made (never another run's stack)."""

    def __init__(self, dep: Deployment, emulated: bool) -> None:
        self.dep, self.emulated = dep, emulated
        self.phase = "lock"
        self.started: dict[NodeRef, set[str]] = {}  # node -> ids of the containers this run started

    def record(self, n: NodeRef) -> None:
        self.started[n] = {c.id for c in engine.project_containers(n.project, n.target)}

    def teardown(self, grace: int) -> list[str]:
        """Remove, by ID, the containers this run started (never one it did not), then the project's
        network once nothing else uses it; what was not removed, said in words."""
        self.phase = "down"
        notes = []
        for n in self.dep.nodes:
            if n in self.started:  # a node this run never started anything on is not touched
                notes += [
                    f"{n.label}: {note}" if n.member else note
                    for note in self._teardown_node(n, grace)
                ]
        return notes

    def _teardown_node(self, n: NodeRef, grace: int) -> list[str]:
        try:
            now = engine.project_containers(n.project, n.target)
            for ctr in now:
                if ctr.id in self.started[n]:
                    engine.remove_container(ctr, grace)
            others = [c.name for c in now if c.id not in self.started[n]]
            if others:
                return [f"not removed: {', '.join(others)} (not started by this run)"]
            for net in engine.project_networks(n.project, n.target):
                engine.remove_network(net)
        except ComposegenError as exc:
            return [f"down: {exc.message}"]
        return []

    def leftovers(self) -> list[str]:
        """Containers and networks of the stack on every node (probe containers of this run are
        removed)."""
        left = []
        for n in self.dep.nodes:
            where = f" on {n.name}" if n.member else ""
            try:
                for probe in engine.probe_containers(n.project, n.target):
                    engine.remove_container(probe)
                left += [
                    f"container {c.name} ({c.state}){where}"
                    for c in engine.project_containers(n.project, n.target)
                ]
                left += [
                    f"network {x.name}{where}" for x in engine.project_networks(n.project, n.target)
                ]
            except ComposegenError as exc:
                left.append(f"unknown{where} ({exc.message})")
        return left

    def interrupted(self) -> Interrupted:
        name = self.dep.name
        again = f"`composegen up {name}{' --emulate' if self.emulated else ''}`"
        if self.phase == "waiting":
            where = " on every node" if self.dep.multi else ""
            return Interrupted(
                f"stopped waiting for {name}; the stack keeps running{where}",
                hint=f"follow it again: `composegen wait {name}`; logs: `composegen logs {name} -f`; "
                f"stop: `composegen down {name}`",
            )
        if self.phase == "lock":
            return Interrupted(
                f"interrupted while waiting for another run of {name}; this run started nothing"
            )
        try:
            left = self.leftovers()
        except KeyboardInterrupt:
            left = ["unknown (interrupted again while looking)"]
        doing = {
            "preflight": "during preflight of",
            "compose up": "while starting",
            "down": "while removing",
        }
        message = f"interrupted {doing.get(self.phase, 'during')} {name}; " + (
            f"left: {', '.join(left)}" if left else "nothing of it is left on the engine"
        )
        hint = (f"remove it: `composegen down {name}`; " if left else "") + f"start again: {again}"
        return Interrupted(message, hint=hint)


class Signalled(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where the main thread is, so `up` leaves as it does on Ctrl-C."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_signalled(signum: int, frame: Any) -> None:
    raise Signalled(signum)


@contextlib.contextmanager
def signals_as_interrupts() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    ours = (s for s in (signal.SIGTERM, signal.SIGHUP) if signal.getsignal(s) != signal.SIG_IGN)
    previous = {s: signal.signal(s, _raise_signalled) for s in ours}  # nohup's SIGHUP stays ignored
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def interrupted_by(run: Run, exc: KeyboardInterrupt) -> Interrupted:
    """Run.interrupted(), told which signal it was: SIGTERM exits 143, SIGHUP 129, Ctrl-C 130."""
    said = run.interrupted()
    if isinstance(exc, Signalled):
        said = Interrupted(f"{signal.Signals(exc.signum).name}: {said.message}", hint=said.hint)
        said.exit_code = 128 + exc.signum
    return said


def up(dep: Deployment, opts: UpOptions, sink: ProgressSink) -> UpReport:
    run = Run(dep, opts.emulate)
    try:
        with signals_as_interrupts(), privatestate.profile_lock(dep.project, dep.name, sink.note):
            run.phase = "preflight"
            return _up(dep, opts, sink, run)
    except KeyboardInterrupt as exc:
        raise interrupted_by(run, exc) from None


def _up(dep: Deployment, opts: UpOptions, sink: ProgressSink, run: Run) -> UpReport:
    prep = prepare(dep, opts, sink)
    for check in caches.offer_nodes(dep, opts.emulate, prep.image):  # the head's cache to a worker
        prep.checks.append(check)
        sink.check(check)
    report = _report(dep, opts.emulate, checks=prep.checks, warnings=prep.warnings)
    run.phase = "compose up"
    sink.phase("starting", 0.0)
    started = time.monotonic()
    # workers first: the head's rendezvous waits for them anyway
    for n in [*dep.nodes[1:], dep.head]:
        run.started.setdefault(n, set())
        try:
            stack = dep.stack(n, emulated=opts.emulate)
            nodecache.with_offline(stack, dep.project, dep.r, n.name).up()
        except EngineError as exc:
            # the engine's ceiling changed since preflight's record
            if "rlimit" in exc.message.lower():
                enginecache.forget_rlimits(n.target)
            run.record(n)
            # a failed `compose up` can leave its network or a created container
            notes = run.teardown(grace=1)
            where = f"{n.label}: " if n.member else ""
            left = "; ".join(notes) if notes else "what this run started was removed"
            raise EngineError(
                f"{dep.name}: {where}{exc.message}; {left}", details=exc.details
            ) from None
        run.record(n)
    if not opts.wait:
        return report
    run.phase = "waiting"
    watcher = watch.Watcher(dep, sink)
    guard = memguard.watch(dep, prep.image) if prep.memory_guard else None
    try:
        waited = watcher.wait(opts.timeout or dep.r.profile.service.startup_timeout)
    except (EngineError, readiness.StackFailed, TimeoutError, watch.NodeFailed) as exc:
        if guard is not None:
            # the guard stopped the stack: say why (exit 3), not what the stop looked like
            guard.check()
        raise _failed(dep, run, watcher, exc, opts) from None
    finally:
        if guard is not None:
            guard.close()
    return finish(report, dep, watcher.container(dep.head), waited, started)


def _report(dep: Deployment, emulated: bool, **found: Any) -> UpReport:
    nodes = [NodeInfo.of(n) for n in dep.nodes] if dep.multi else None
    base = dep.endpoint().base_url
    found |= {"name": dep.name, "project": dep.head.project, "endpoint": base, "nodes": nodes}
    return UpReport(emulated=emulated, **found)


def attach(
    dep: Deployment, sink: ProgressSink, timeout: float | None = None, *, ready_before: bool = False
) -> UpReport:
    """Wait for a stack another command started (e.g. `up --no-wait`) with the same progress, and
    summarise it like `up` does. Times count from the head container's start; for a stack that was
    ready before (`ready_before`), its time to ready is when its engine said so, not when this
    command looked."""
    watcher = watch.Watcher(dep, sink)
    head = watcher.container(dep.head)
    if head is None:
        # up --emulate wrote it
        again = f"{dep.name}{' --emulate' * dep.override_path(dep.head).is_file()}"
        raise EngineError(f"{dep.name} is not started", hint=f"`composegen up {again}` first")
    elapsed = max(0.0, time.time() - head.started_at) if head.started_at else 0.0
    sink.phase("starting", elapsed)
    budget = (
        timeout
        if timeout is not None
        else max(1.0, dep.r.profile.service.startup_timeout - elapsed)
    )
    started = time.monotonic() - elapsed
    guard = memguard.watch_when_on(dep, head.image_id)
    try:
        with signals_as_interrupts():
            waited = watcher.wait(budget)
    except (EngineError, readiness.StackFailed, TimeoutError, watch.NodeFailed) as exc:
        if guard is not None:
            guard.check()  # the guard stopped the stack: say why (exit 3)
        raise _failed(dep, None, watcher, exc, UpOptions()) from None
    except KeyboardInterrupt as exc:
        run = Run(dep, head.emulated)
        run.phase = "waiting"
        raise interrupted_by(run, exc) from None
    finally:
        if guard is not None:
            guard.close()
    report = finish(
        _report(dep, head.emulated, checks=[]), dep, watcher.container(dep.head), waited, started
    )
    if (
        ready_before
        and report.time_to_ready_s is not None
        and report.detection_latency_s is not None
    ):
        report.time_to_ready_s = round(report.time_to_ready_s - report.detection_latency_s, 3)
        # nothing was polled for: no latency
        report.detection_latency_s, report.ready_before = None, True
    return report


def finish(
    report: UpReport,
    dep: Deployment,
    ctr: ContainerFacts | None,
    waited: readiness.Waited,
    started: float,
) -> UpReport:
    """Fill the ready summary from the head container's own startup log."""
    report.phases = [PhaseTime(phase=k, seconds=v) for k, v in waited.phases.items()]
    report.time_to_ready_s = round(time.monotonic() - started, 3)
    report.startup = startup_check(dep.r, ctr) if ctr is not None else None
    report.detection_latency_s = watch.detection_latency(ctr, waited)
    caches.note_start(dep.project, dep.r, report, ctr)  # the cold figure beside a warm start
    return report


def startup_check(r: Resolved, ctr: ContainerFacts) -> StartupCheck:
    """The head's startup report, with the profile's flags compared against what the engine ran
    with."""
    return checked_startup(r, startup.parse_startup_log(engine.logs(ctr)))


def checked_startup(r: Resolved, parsed: StartupReport) -> StartupCheck:
    """A parsed startup report (a running head's, or `startup --log`'s) with `mismatches`: profile
    flags whose effective value differs from the engine's own `non-default args` line; null when the
    log has no such line (nothing to compare is not "no mismatch")."""
    return StartupCheck(**dict(parsed), mismatches=_mismatches(r, parsed))


def _mismatches(r: Resolved, parsed: StartupReport) -> list[Mismatch] | None:
    args = parsed.effective_args
    return None if args is None else startup.mismatches(r.engine_flags(), args, r.catalog)


def _failed(
    dep: Deployment, run: Run | None, watcher: watch.Watcher, exc: Exception, opts: UpOptions
) -> EngineError:
    """The failure of a wait: the node to blame (a dead worker even when the head failed next), its
    last log lines (and the head's end when a worker is blamed), and what became of the stack."""
    blamed, message = _blame(dep, watcher, exc)
    tails = []
    for n in sorted(dep.nodes, key=lambda n: n != blamed):  # the blamed node's log first
        if n == blamed or (n.role == "head" and blamed.role != "head"):
            tails.append(_tail(watcher, n, TAIL_ON_FAILURE if n == blamed else 20))
    if opts.down_on_failure and run is not None:
        tails += run.teardown(grace_seconds(dep.r))
        left = "stopped and removed (--down-on-failure)"
    else:
        left = f"left as it is: `composegen logs {dep.name}`, `composegen down {dep.name}`"
    where = f"{blamed.label}: " if blamed.member else ""
    return EngineError(
        f"{dep.name}: {where}{message}; the stack was {left}",
        details="\n".join(t for t in tails if t) or None,
    )


def _blame(dep: Deployment, watcher: watch.Watcher, exc: Exception) -> tuple[NodeRef, str]:
    message = exc.message if isinstance(exc, EngineError) else str(exc)
    if isinstance(exc, watch.NodeFailed):
        return exc.ref, message
    for n in dep.nodes[1:]:
        try:
            problem = watcher.worker_problem(n)
        except ComposegenError as err:
            problem = f"its engine stopped answering ({err.message})"
        if problem:
            return n, f"{problem}; the head then failed too ({message})"
    return dep.head, message


def _tail(watcher: watch.Watcher, n: NodeRef, lines: int) -> str | None:
    title = f"node {n.name}: last {lines} log lines" if n.member else f"last {lines} log lines"
    try:
        ctr = watcher.container(n)
        text = engine.logs(ctr) if ctr is not None else ""
    except ComposegenError as exc:
        return f"(node {n.name}: logs unavailable: {exc.message})"
    return failure_details(text, title, lines)


def failure_details(log_text: str, title: str, lines: int = TAIL_ON_FAILURE) -> str | None:
    """The log's last lines, then what the startup parser recognises in the whole log, with hints
    (e.g. KV memory too small → the longest max-model-len that fits)."""
    tail = "\n".join(log_text.rstrip().splitlines()[-lines:])
    text = f"--- {title} ---\n" + tail.rstrip() if tail.strip() else ""
    for error in startup.parse_startup_log(log_text).to_json()["errors"]:
        text += f"\nrecognised {error['kind']}: {error['hint']}"
    return text or None


def grace_seconds(r: Resolved) -> int:
    """The profile's stop_grace_period in whole seconds (at least 1), for `compose down -t`."""
    total = parse_duration(r.profile.service.stop_grace_period)
    return max(1, round(total)) if total is not None else 10
