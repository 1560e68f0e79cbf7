"""`qualify NAME [--emulate]` (proofarm.qualify_here) and the CLI's refusals and exit codes, on the fake
engine (tests/edge/fakearm.py): left as found after Ctrl-C during `up`, no emulated stack where an
alias points, `--gates` only with `--alias`, a failed restore exit 3 with its verdict in `--json`."""

from __future__ import annotations

import json

import pytest

from composegen.cli import qualify_command
from composegen.edge import proofarm, service
from composegen.edge.reports import ProofReport
from composegen.errors import BadInput, EngineError
from composegen.evidence.reports.qualify import QualifyResult
from tests.edge.fakearm import NEW, OLD, Engine, example
from tests.support.cli import run_cli


def test_ctrl_c_while_the_emulated_stack_starts_takes_it_down_again(tmp_path, monkeypatch):
    project, edge = example(tmp_path)
    engine = Engine({OLD: ("awake", False), NEW: ("down", False)},
                    fail={f"up {NEW} emulated": KeyboardInterrupt()})  # fmt: skip
    engine.install(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        proofarm.qualify_here(project, edge.stacks[NEW], True, 0, lambda _: None)
    assert engine.calls == [f"up {NEW} emulated", f"down {NEW}"]


def test_an_emulated_stack_where_an_alias_points_is_refused(tmp_path, monkeypatch):
    project, edge = example(tmp_path)
    engine = Engine({OLD: ("down", False), NEW: ("down", False)})
    engine.install(monkeypatch)
    with pytest.raises(BadInput, match="ds4-flash points at it") as caught:
        proofarm.qualify_here(project, edge.stacks[OLD], True, 0, lambda _: None)
    hint = caught.value.hint or ""
    assert "--alias" in hint and f"composegen up {OLD}" in hint and engine.calls == []


def test_gates_without_alias_is_refused(tmp_path):
    project, _ = example(tmp_path)
    res = run_cli("--root", str(project.root), "qualify", NEW, "--gates", "smoke")
    assert res.returncode == 2 and "--gates needs --alias" in res.stderr, res.stderr


def test_a_failed_restore_exits_3_with_the_verdict_in_json(tmp_path, monkeypatch, capsys):
    project, edge = example(tmp_path)
    verdict = QualifyResult.model_construct(qualified=True, run="runs/q1")
    report = ProofReport.model_construct(
        alias="ds4-flash", profile=NEW, serving_before=OLD, serving_after=OLD, then="restore",
        qualified=True, qualify=verdict, evidence=None, path="cold", path_reason="", stages=[],
        steps=[], seconds=1.0, restore_failed=f"qualifying {NEW}: qualified; bringing back failed",
    )  # fmt: skip
    monkeypatch.setattr(qualify_command, "_load", lambda name: (project, edge.stacks[name]))
    monkeypatch.setattr(service, "load", lambda project: edge)
    monkeypatch.setattr(proofarm, "prove", lambda *a, **k: report)
    with pytest.raises(EngineError, match="bringing back failed") as caught:
        qualify_command.qualify(name=NEW, sleep_cycles=0, emulate=True, alias="ds4-flash",
                                then="restore", gates=None, json_=True)  # fmt: skip
    assert caught.value.exit_code == 3
    shown = json.loads(capsys.readouterr().out)
    assert shown["qualified"] and shown["qualify"]["run"] == "runs/q1" and shown["restore_failed"]
