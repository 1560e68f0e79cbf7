"""Proofs carry their provenance (issue 49 #4): a real promote refuses a qualification the EMULATED vLLM
made, and an emulated one refuses a real engine's, naming both; the same kind is accepted."""

from __future__ import annotations

import pytest

from composegen import privatestate
from composegen.edge import evidence
from composegen.errors import CheckFailed
from composegen.evidence import bundle
from composegen.profiles import resolve as profiles
from composegen.vllm.reports import StartupReport
from tests.edge.test_promote_evidence import project  # noqa: F401  (the fixture)


def _run(project, emulated: bool) -> str:  # noqa: F811
    r = profiles.load(project, "cand")
    verdict: dict = {"profile": "cand", "hash": r.hash, "qualified": True, "emulated": emulated}
    verdict["seal"] = privatestate.seal(project, verdict)
    return str(
        bundle.write_run(
            project,
            r,
            startup_log_text="x\n",
            startup_report=StartupReport(ready=True),
            extra_raw={"qualify.json": verdict},
        )
    )


def test_a_real_switch_refuses_an_emulated_proof_and_the_reverse(project):  # noqa: F811
    r = profiles.load(project, "cand")
    emulated = _run(project, emulated=True)
    with pytest.raises(CheckFailed, match="made by the EMULATED vLLM, a switch to a real engine"):
        evidence.qualified_run(project, r, emulated, emulate=False)
    assert evidence.qualified_run(project, r, emulated, emulate=True)["kind"] == "qualify"
    real = _run(project, emulated=False)
    with pytest.raises(CheckFailed, match="made by a real engine, a switch to the EMULATED vLLM"):
        evidence.qualified_run(project, r, real, emulate=True)
    assert evidence.qualified_run(project, r, real, emulate=False)["kind"] == "qualify"
