"""The wait hands the sink every line the engine logged up to its ready line, even when Docker's log stream
delivers the tail after /health answered (CI saw `API server starting` skipped on a loaded engine)."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

from composegen.stack import readiness, watch
from composegen.stack.placement import NodeRef
from composegen.stack.progress import LogLine, ProgressSink
from composegen.stack.targets import DEFAULT

TAIL = [
    "(APIServer pid=1) INFO Starting vLLM API server 0 on http://0.0.0.0:8000",
    "INFO:     Application startup complete.",
]


class _LateStream:
    """A log whose tail arrives `delay_s` after the API answered."""

    def __init__(self, answered: threading.Event, delay_s: float, tail: list[str]) -> None:
        self.answered, self.delay_s, self.tail = answered, delay_s, tail

    def lines(self):
        yield 1.0, "INFO Graph capturing finished in 9 secs"
        self.answered.wait(10)
        time.sleep(self.delay_s)
        for i, text in enumerate(self.tail):
            yield 2.0 + i, text

    def close(self) -> None:
        pass


class _Lines(ProgressSink):
    def __init__(self) -> None:
        self.texts: list[str] = []

    def log_line(self, line: LogLine) -> None:
        self.texts.append(line.text)


def _wait(monkeypatch, delay_s: float, tail: list[str]) -> tuple[list[str], float]:
    answered = threading.Event()
    ctr = SimpleNamespace(name="vllm-1")
    monkeypatch.setattr(watch.engine, "project_containers", lambda project, target: [ctr])
    monkeypatch.setattr(watch, "vllm_container", lambda containers: containers[0])
    monkeypatch.setattr(watch.engine, "LogStream", lambda c: _LateStream(answered, delay_s, tail))
    monkeypatch.setattr(
        watch.engine,
        "inspect",
        lambda c: SimpleNamespace(state="running", exit_code=None, restarts=0),
    )

    def wait_ready(head_state, *args, on_tick, **kwargs):
        head_state()  # finds the container: its follower starts
        on_tick(0.0)
        answered.set()
        return readiness.Waited(ready_at=time.time())

    monkeypatch.setattr(watch.readiness, "wait_ready", wait_ready)
    head = NodeRef(member=None, target=DEFAULT, key="m", project="composegen-m")
    dep = SimpleNamespace(
        head=head,
        nodes=(head,),
        r=SimpleNamespace(
            profile=SimpleNamespace(model=SimpleNamespace(served_name="m")), flag=lambda f: None
        ),
        endpoint=lambda: "http://127.0.0.1:1",
    )
    sink = _Lines()
    began = time.monotonic()
    watch.Watcher(dep, sink).wait(timeout=5)  # type: ignore[arg-type]
    return sink.texts, time.monotonic() - began


def test_a_ready_line_delivered_late_still_reaches_the_sink_with_the_lines_before_it(monkeypatch):
    texts, _ = _wait(monkeypatch, delay_s=0.8, tail=TAIL)
    assert texts[1:] == TAIL


def test_a_log_without_a_ready_line_delays_the_wait_by_the_grace_at_most(monkeypatch):
    monkeypatch.setattr(watch, "READY_LINE_GRACE_S", 0.3)
    texts, took = _wait(monkeypatch, delay_s=0.0, tail=["INFO something else"])
    assert texts[-1] == "INFO something else" and took < 3
