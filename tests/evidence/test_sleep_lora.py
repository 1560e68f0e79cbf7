"""`qualify --sleep-cycles` on a profile with LoRA adapters (issue 49 #3): a level-1 wake can corrupt
the adapters while the base model answers as before (vLLM issue 53888, at TP 2), so every cycle
probes each adapter too (model = the adapter's name) and compares with its answer before the first
sleep. Against the emulated vLLM as a local process (its sleep routes, its adapters, its
EMU_FAULT=lora_corrupted); only the container plumbing of the driver is stood in for."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from composegen.evidence import sleepcycles
from composegen.profiles import resolve
from composegen.project import Project
from composegen.stack.sleepmode import Asleep
from composegen.wire.http import Peer
from tests.support.emulator_proc import EmulatorProc
from tests.support.helpers import MINIMAL, make_project

LORA = (
    '  enable-lora: true\n  lora-modules: [sql=/adapters/sql, \'{"name": "chat", "path": "/a"}\']\n'
)


class EngineOnly:
    """stack.driver for one local emulator: its HTTP, its sleep routes; no container to read."""

    def __init__(self, port: int) -> None:
        engine, self.sent = Peer("127.0.0.1", port), []

        def recorded(method, path, data=None, **kw):
            self.sent.append((path, data))
            return engine.fetch(method, path, data, **kw)

        self.peer = SimpleNamespace(fetch=recorded)

    def endpoint(self, r):
        return SimpleNamespace(peer=self.peer)

    def sleep_stack(self, project, r, level=None, mode="wait"):
        assert (
            self.peer.fetch("POST", f"/sleep?level={level}&mode={mode}", b"{}", deadline_s=9).status
            == 200
        )
        return Asleep(level=level or 1, since=None, residue_gib=0.87)

    def wake_stack(self, project, r):
        assert self.peer.fetch("POST", "/wake_up", b"{}", deadline_s=9).status == 200
        return 0.3

    def head_container(self, project, r):
        return None

    def host_memory(self, r):
        return None


@pytest.mark.parametrize("fault", [None, "lora_corrupted"])
def test_each_adapter_is_probed_every_cycle_and_a_corrupted_one_fails(tmp_path, monkeypatch, fault):
    project = Project(make_project(tmp_path, {"l": MINIMAL + LORA + "standby: {level: 1}\n"}))
    r = resolve.load(project, "l")
    assert sleepcycles.adapters(r) == ["sql", "chat"]
    argv = ["org/model", "--served-model-name", "tiny", "--enable-sleep-mode", "--enable-lora",
            "--lora-modules", "sql=/adapters/sql", '{"name": "chat", "path": "/a"}']  # fmt: skip
    env = {"VLLM_SERVER_DEV_MODE": "1", "EMU_FAULT": fault or ""}
    with EmulatorProc.start(tmp_path, serve_args=argv, env=env) as emu:
        engine = EngineOnly(emu.port)
        monkeypatch.setattr(sleepcycles, "driver", engine)
        result = sleepcycles.run(project, r, 2, emulated=True)
    probed = [p for p, body in engine.sent if p == "/v1/chat/completions"]
    models = [b'"model": "tiny"', b'"model": "sql"', b'"model": "chat"']
    asked = [next(m for m in models if m in body) for p, body in engine.sent if p in probed]
    assert asked == models * 3  # before the first sleep, then after each of the 2 wakes
    if fault is None:
        assert result.passed, result.reason
    else:  # the base model answers as before: only the adapters' probes see it
        assert not result.passed and result.reason == "cycle 1: the answer changed"
