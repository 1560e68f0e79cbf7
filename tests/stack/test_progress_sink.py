"""The seam's progress sink on the real engine: `up` reports each preflight check and `starting`;
`attach` to the started stack reports the readiness phases in order and every log line the container
writes, with Docker's timestamp — what the terminal display and `composegen wait` are built on."""

from __future__ import annotations

import pytest

from composegen.profiles import resolve
from composegen.project import Project
from composegen.stack import driver
from composegen.stack.progress import LogLine, ProgressSink
from tests.support.engine import emulated_project, force_remove, project_leftovers

pytestmark = pytest.mark.docker


class Recorder(ProgressSink):
    def __init__(self) -> None:
        self.events: list[tuple[str, object]] = []

    def check(self, check) -> None:
        self.events.append(("check", check.name))

    def phase(self, name: str, t: float) -> None:
        self.events.append(("phase", name))

    def log_line(self, line: LogLine) -> None:
        self.events.append(("log", line))

    def heartbeat(self, t: float, last_line: str) -> None:
        self.events.append(("heartbeat", last_line))

    def of(self, kind: str) -> list:
        return [value for k, value in self.events if k == kind]


def test_up_then_attach_report_checks_phases_and_every_log_line(tmp_path):
    root, name, _ = emulated_project(tmp_path, load=2)
    project, started = Project(root), Recorder()
    r = resolve.load(project, name)
    try:
        report = driver.up(project, r, driver.UpOptions(emulate=True, wait=False), started)
        assert {"engine", "compose", "image", "port"} <= set(started.of("check"))
        assert started.of("phase") == ["starting"] and report.phases == []

        attached = Recorder()
        ready = driver.attach(project, r, attached)
        phases = attached.of("phase")
        assert phases[0] == "starting" and phases[-4:] == [
            "running",
            "port open",
            "health 200",
            "models ready",
        ]
        lines = attached.of("log")
        assert lines and all(line.timestamp is not None and line.node is None for line in lines)
        assert [line.timestamp for line in lines] == sorted(line.timestamp for line in lines)
        texts = [line.text for line in lines]
        assert any("Application startup complete." in t for t in texts)
        assert any("GPU KV cache size" in t for t in texts)
        assert attached.of("heartbeat")
        assert ready.startup is not None and ready.startup.ready is True and ready.emulated is True
        assert [p.phase for p in ready.phases][-1] == "models ready"

        down = driver.down(project, r)
        assert down.removed == [f"composegen-{name}-vllm-1"]
        assert project_leftovers(f"composegen-{name}") == []
    finally:
        force_remove(f"composegen-{name}")
