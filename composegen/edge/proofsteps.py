"""One run of `qualify NAME --alias ALIAS` (edge/proofarm.py): the serving stack out of the way, NAME
in and qualified, then everything put back as it was found, or the error that says what was not.

Put back means: NAME down, asleep or awake as it was found; the serving stack awake again as it ran
(an emulated one emulated, a real one real: `qualify --emulate` never swaps a real engine for a test
double), its identity and gates checked. The journal keeps the same facts, so `edge recover` puts
back a killed run the same way (edge/recovery.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from composegen.edge import exposure, standby, undo
from composegen.edge.config import Edge
from composegen.errors import ComposegenError, EngineError, Interrupted
from composegen.evidence import qualify
from composegen.evidence.reports.qualify import QualifyResult
from composegen.profiles.resolved import Resolved
from composegen.project import Project
from composegen.stack import driver

PathKind = Literal["standby", "cold", "unchanged"]
State = Literal["down", "asleep", "awake"]


def qualified(
    project: Project, r: Resolved, cycles: int, on_step: Callable[[str], None] | None
) -> QualifyResult:
    gate = exposure.gate_for(project, r)
    return qualify.qualify_stack(project, r, gate, sleep_cycles=cycles, on_step=on_step)


@dataclass
class Arm:
    """Who serves, who is proved, how each was found (to put back), and the steps done."""

    project: Project
    edge: Edge
    alias: str
    current: str
    target: str
    emulate: bool  # NAME started emulated
    sink: undo.StageSink
    path: PathKind
    target_was: State
    current_emulated: bool  # the serving stack's engine is the emulator

    def away(self, cycles: int, gates: list[str] | None) -> QualifyResult:
        """The serving stack out of the way, the target in, qualified."""
        old, new = self.edge.stacks[self.current], self.edge.stacks[self.target]
        if self.path == "standby":  # drained (then aborted), as a switch's
            standby.sleep_drained(self.project, old, self.sink.run)
        else:
            self.sink.run(f"stopping {self.current}", lambda: driver.down(self.project, old))
        if self.target_was == "asleep":  # a switch's steps; its partner without `standby:`: woken
            steps = standby.waking(self.project, new, gates)
            for name, step in steps if self.path == "standby" else steps[:1]:
                self.sink.run(name, step)
        else:
            how = driver.UpOptions(emulate=self.emulate)
            up = lambda: driver.up_or_attach(self.project, new, how, self.sink)  # noqa: E731
            self.sink.run(f"starting {self.target}", up)
        stage = f"qualifying {self.target}"
        found: list[QualifyResult] = []
        say = lambda s: self.sink.say(f"{stage}: {s}")  # noqa: E731
        self.sink.run(stage, lambda: found.append(qualified(self.project, new, cycles, say)))
        return found[0]

    def back(self) -> None:
        """The target as it was found, the old stack serving again (as `edge recover`)."""
        plan = undo.Undo(
            self.current, self.target, self.path, self.target_was, self.current_emulated
        )
        undo.put_back(self.project, self.edge, plan, self.sink)

    def failed(self, exc: BaseException) -> ComposegenError:
        """After a failure, a bug, Ctrl-C or a signal: the old stack back and the alias on it (exit
        1, or the interrupt's own code), or the error that says not."""
        return undo.restored(self.sink, f"qualifying {self.target}", exc, self.back, "restored")

    def restore(self, verdict: str) -> EngineError | None:
        """After the qualification (VERDICT: its outcome and bundle): put back; the error when that
        failed (exit 3, the verdict kept), None when done. Ctrl-C leaves it to `edge recover`."""
        what = f"qualifying {self.target}: {verdict}"
        try:
            self.back()
        except (KeyboardInterrupt, Interrupted) as exc:  # `up` turns Ctrl-C into Interrupted
            raise undo.left_to_recover(exc, what, self.current) from None
        except Exception as exc:  # whatever it was, the alias must say so
            return undo.restore_failed(self.project, self.edge, self.alias, self.current, what, exc)
        return None
