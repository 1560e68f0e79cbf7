"""A fake engine for `qualify --alias` unit tests (tests/edge/test_qualify_arm*.py): each stack down,
asleep or awake, emulated or real, every driver call logged. What it cannot see — the real engine's
timing — the engine tests do (test_qualify_*_engine.py); what they cannot see, their stacks being
all emulated (a real stack restored as emulated, a failure in one exact step), these do."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest

from composegen.edge import config, proofsteps, standby, standbyplan
from composegen.edge import evidence as proof
from composegen.evidence import gatecheck, sleepcycles
from composegen.evidence.reports.qualify import QualifyResult
from composegen.project import Project
from composegen.stack import driver
from tests.support.helpers import REPO

OLD, NEW = "4096-131k", "8192-131k"  # the example edge: ds4-flash serves OLD


@dataclass
class Engine:
    state: dict[str, tuple[str, bool]]  # name -> (down | asleep | awake, emulated)
    calls: list[str] = field(default_factory=list)
    fail: dict[str, BaseException] = field(default_factory=dict)  # "up NAME" -> raised there
    hooks: dict[str, Callable[[], None]] = field(default_factory=dict)  # "down NAME" -> run first
    verdict: bool = True

    def _do(self, what: str, name: str, to: tuple[str, bool] | None) -> None:
        self.calls.append(f"{what} {name}")
        self.hooks.pop(f"{what} {name}", lambda: None)()
        exc = self.fail.pop(f"{what} {name}", None)
        if exc is not None:
            raise exc
        if to is not None:
            self.state[name] = to

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        def head(project: Project, r, *_a, **_k):
            st, emu = self.state[r.name]
            return None if st == "down" else SimpleNamespace(running=True, emulated=emu)

        def asleep(project: Project, r, strict: bool = False):
            return object() if self.state[r.name][0] == "asleep" else None

        def up(project: Project, r, opts, sink=None, timeout=None):
            self._do("up", f"{r.name}{' emulated' if opts.emulate else ''}", None)
            self.state[r.name] = ("awake", opts.emulate)

        def handles(project: Project, strict=(), known=None, only=None):
            found = {}
            for n in [only] if only else list(self.state):
                r = SimpleNamespace(name=n)
                if self.state[n][0] != "down":
                    found[n] = SimpleNamespace(ctr=head(project, r), asleep=asleep(project, r))
            return found

        def sleep(project: Project, r, level=None, mode="wait", held=None):
            self._do(f"sleep({mode})", r.name, ("asleep", self.state[r.name][1]))

        def qualified(project: Project, r, cycles, on_step):
            self._do("qualify", r.name, None)
            return QualifyResult.model_construct(qualified=self.verdict, run="runs/q1")

        m = monkeypatch.setattr
        m(driver, "head_container", head)
        m(driver, "sleep_state", asleep)
        m(driver, "handles", handles)
        m(driver, "engine_info", lambda: {})
        m(driver, "settle", lambda project, r: None)
        m(driver, "up", up)
        m(driver, "up_or_attach", up)
        m(driver, "down", lambda project, r, *a: self._do("down", r.name, ("down", False)))
        m(driver, "sleep_stack", sleep)
        m(driver, "wake_stack",
          lambda project, r, held=None: self._do("wake", r.name, ("awake", self.state[r.name][1])))  # fmt: skip
        m(proofsteps, "qualified", qualified)
        m(gatecheck, "require_gates", lambda r, only: self._do("gates", r.name, None))
        m(sleepcycles, "probe", lambda r: self._do("warm-up", r.name, None))
        m(standby, "identity", lambda r: self._do("identity", r.name, None))
        m(standby, "_drained", lambda r, deadline: self.calls.append(f"drain {r.name}") or False)
        m(standbyplan, "check_switch", lambda *a: None)
        m(standbyplan, "check_start", lambda *a: None)
        m(proof, "qualified_run", lambda project, r, run: self._proof(r.name))

    def _proof(self, name: str) -> dict:
        self._do("proof", name, None)
        return {"kind": "qualify", "ref": "runs/q1", "sha256": "0" * 64}


def example(tmp_path: Path, standby_too: bool = False) -> tuple[Project, config.Edge]:
    """The example edge in TMP_PATH (both profiles with `standby:` when STANDBY_TOO)."""
    root = tmp_path / "team-edge"
    shutil.copytree(REPO / "examples/team-edge", root,
                    ignore=shutil.ignore_patterns("out", "runs", ".composegen"))  # fmt: skip
    if standby_too:
        for name in (OLD, NEW):
            path = root / "profiles" / f"{name}.yaml"
            path.write_text(path.read_text(encoding="utf-8") + "standby: {level: 1}\n", "utf-8")
    project = Project(root)
    return project, config.load(project)
