"""Waiting for a deployment to be ready, with live progress: the head's container state and API
(readiness.wait_ready), every worker's container (a dead worker fails the wait and is named), and
every node's log lines streamed to the progress sink as they are written (one follower thread per
container; events are delivered on the waiting thread). `up` and `attach` (an already-starting
stack) share it."""

from __future__ import annotations

import queue
import threading
import time

from composegen.profiles.resolved import Resolved
from composegen.stack import engine, readiness
from composegen.stack.facts import ContainerFacts
from composegen.stack.placement import Deployment, NodeRef, vllm_container
from composegen.stack.progress import LogLine, ProgressSink
from composegen.stack.targets import docker_time
from composegen.vllm.stages import is_ready_line

WORKER_POLL_S = 0.5
# The engine logs `Application startup complete.` before it answers, but Docker's log stream can
# hand the line over later than /health answers (seconds on a loaded engine): the wait is bounded.
READY_LINE_GRACE_S = 5.0


class NodeFailed(Exception):
    def __init__(self, n: NodeRef, message: str):
        super().__init__(message)
        self.ref = n


class _Followers:
    """One thread per container, following its log; lines wait in a queue for the waiting thread."""

    def __init__(self) -> None:
        self.lines: queue.SimpleQueue[LogLine] = queue.SimpleQueue()
        self.streams: list[engine.LogStream] = []
        self.last = ""
        self.ready_line = threading.Event()  # a follower has read the engine's ready line

    def follow(self, n: NodeRef, ctr: ContainerFacts) -> None:
        stream = engine.LogStream(ctr)
        self.streams.append(stream)

        def pump() -> None:
            for stamp, text in stream.lines():
                self.lines.put(LogLine(n.name, ctr.name, stamp, text))
                if is_ready_line(text):
                    self.ready_line.set()

        threading.Thread(target=pump, name=f"logs-{ctr.name}", daemon=True).start()

    def drain(self, sink: ProgressSink) -> None:
        while True:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                return
            if line.text.strip():
                self.last = line.text
            sink.log_line(line)

    def close(self) -> None:
        for stream in self.streams:
            stream.close()


class Watcher:
    """A deployment's containers as the wait finds them (looked up once, then inspected)."""

    def __init__(self, dep: Deployment, sink: ProgressSink) -> None:
        self.dep, self.sink = dep, sink
        self.found: dict[NodeRef, ContainerFacts] = {}
        self.followers = _Followers()

    def container(self, n: NodeRef) -> ContainerFacts | None:
        if n not in self.found:
            ctr = vllm_container(engine.project_containers(n.project, n.target))
            if ctr is None:
                return None
            self.found[n] = ctr
            self.followers.follow(n, ctr)
        return self.found[n]

    def head_state(self) -> tuple[str, int | None, int]:
        ctr = self.container(self.dep.head)
        now = engine.inspect(ctr) if ctr is not None else None
        if ctr is not None and now is None:
            raise readiness.StackFailed("the container is gone (removed while starting)")
        return (now.state, now.exit_code, now.restarts) if now else ("", None, 0)

    def worker_problem(self, n: NodeRef) -> str | None:
        ctr = self.container(n)
        now = engine.inspect(ctr) if ctr is not None else None
        if now is None:
            return "its container is gone"
        if now.state in ("exited", "dead"):
            return f"the container exited with code {now.exit_code}"
        if now.state == "restarting":
            return f"the container is restarting (exit code {now.exit_code})"
        return None

    def wait(self, timeout: float) -> readiness.Waited:
        last_workers = [0.0]

        def tick(t: float) -> None:
            if t - last_workers[0] >= WORKER_POLL_S:
                last_workers[0] = t
                for n in self.dep.nodes[1:]:
                    problem = self.worker_problem(n)
                    if problem:
                        raise NodeFailed(n, problem)
            self.followers.drain(self.sink)
            self.sink.heartbeat(t, self.followers.last)

        r, answered = self.dep.r, False
        try:
            asked = (self.dep.endpoint(), r.profile.model.served_name, max_model_len(r), timeout)
            waited = readiness.wait_ready(
                self.head_state, *asked, on_phase=self.sink.phase, on_tick=tick
            )
            answered = True
            return waited
        finally:
            # let the followers hand over what was logged up to now: on success, every line up to
            # the ready line (the stages between the last poll and /health 200 are in the engine's
            # log, not yet ours)
            if not (answered and self.followers.ready_line.wait(READY_LINE_GRACE_S)):
                time.sleep(0.05)
            self.followers.drain(self.sink)
            self.followers.close()


def max_model_len(r: Resolved) -> int | None:
    value = r.flag("max-model-len")
    return value if isinstance(value, int) and value > 0 else None


def detection_latency(ctr: ContainerFacts | None, waited: readiness.Waited) -> float | None:
    """Seconds from the engine logging `Application startup complete.` (Docker's timestamp) to our
    seeing /health 200: what polling costs, measured rather than assumed."""
    if ctr is None or waited.ready_at is None:
        return None
    for line in engine.logs(ctr, timestamps=True).splitlines():
        if is_ready_line(line):
            when = docker_time(line.split(" ", 1)[0])
            return round(waited.ready_at - when, 3) if when is not None else None
    return None
