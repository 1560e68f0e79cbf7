"""Every report's JSON Schema by name, for `composegen schema --report NAME` (generated, never restated).

Each entry is "module:Model"; the module is imported only when its schema is asked for, so the profile
commands never pay for the stack or evidence modules.
"""

from __future__ import annotations

import importlib
from typing import Any

from composegen.errors import BadInput

REPORTS: dict[str, str] = {
    "evidence": "composegen.evidence.record:EvidenceBundle",
    "up": "composegen.stack.reports:UpReport",
    "wait": "composegen.stack.reports:UpReport",  # `wait --json`: the `up` report of the stack it waited for
    "down": "composegen.stack.reports:DownReport",
    "status": "composegen.stack.reports:StatusReport",
    "compare": "composegen.evidence.compare:CompareReport",
    "diff": "composegen.diff.semantic:DiffChange",
    "diff-targets": "composegen.diff.targets:TargetsDiffReport",
    "list": "composegen.profiles.reports:ListReport",
    "validate": "composegen.profiles.reports:ValidateReport",
    "show": "composegen.profiles.reports:ShowReport",
    "render": "composegen.profiles.reports:RenderReport",
    "render-check": "composegen.profiles.reports:RenderCheckReport",
    "weights": "composegen.weights.check:WeightsReport",
    "top": "composegen.monitor.sample:TopSample",
    "bench": "composegen.evidence.benchstats:BenchResult",
    "vllm-bench-serve": "composegen.evidence.vllmresult:VllmBenchServeResult",
    "ladder": "composegen.evidence.models:LadderResult",
    "qualify": "composegen.evidence.models:QualifyResult",
    "report": "composegen.evidence.runreport:RunsReport",
    "shm": "composegen.shm.models:ShmScan",
    "shm-reclaim": "composegen.shm.models:ShmReclaim",
    "startup": "composegen.vllm.startup:StartupCheck",
    "plan": "composegen.evidence.plan_report:PlanResult",
    "gate": "composegen.evidence.gate_report:GateResult",
    "doctor": "composegen.provision.doctor:DoctorReport",
    "comparison": "composegen.campaign.comparison:ComparisonReport",
    "qualification": "composegen.campaign.qualifyarm:QualificationReport",
    "campaign-state": "composegen.campaign.state:CampaignState",
    "keys": "composegen.edge.reports:ClientsReport",
    "edge-status": "composegen.edge.reports:EdgeStatusReport",
    "promote": "composegen.edge.reports:SwitchReport",
    "rollback": "composegen.edge.reports:SwitchReport",
    "exposure": "composegen.edge.reports:ExposureReport",
}


def names() -> list[str]:
    return sorted(REPORTS)


def schema(name: str) -> dict[str, Any]:
    target = REPORTS.get(name)
    if target is None:
        import difflib

        close = difflib.get_close_matches(name, REPORTS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise BadInput(f"--report: no report named {name!r}{hint}; known: {', '.join(names())}")
    module, model = target.split(":")
    schema: dict[str, Any] = getattr(importlib.import_module(module), model).json_schema()
    schema.setdefault("title", model)
    schema["$id"] = f"composegen:report/{name}"
    return schema
