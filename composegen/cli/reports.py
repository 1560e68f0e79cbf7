"""Every report's JSON Schema by name, for `composegen schema --report NAME` (generated, never
restated).

Each entry is "module:Model"; the module is imported only when its schema is asked for, so the
profile commands never pay for the stack or evidence modules.
"""

from __future__ import annotations

import importlib
from typing import Any

from composegen.errors import BadInput

REPORTS: dict[str, str] = {
    "evidence": "composegen.evidence.reports.bundle:EvidenceBundle",
    "up": "composegen.stack.reports:UpReport",
    # `wait --json`: the `up` report of the stack it waited for
    "wait": "composegen.stack.reports:UpReport",
    "down": "composegen.stack.reports:DownReport",
    "status": "composegen.stack.reports:StatusReport",
    "compare": "composegen.evidence.reports.compare:CompareReport",
    "diff": "composegen.diff.reports:DiffChange",
    "diff-targets": "composegen.diff.reports:TargetsDiffReport",
    "list": "composegen.profiles.reports:ListReport",
    "validate": "composegen.profiles.reports:ValidateReport",
    "show": "composegen.profiles.reports:ShowReport",
    "render": "composegen.profiles.reports:RenderReport",
    "render-check": "composegen.profiles.reports:RenderCheckReport",
    "weights": "composegen.weights.reports:WeightsReport",
    "top": "composegen.monitor.reports:TopSample",
    "bench": "composegen.bench.reports:BenchResult",
    "bench-via-edge": "composegen.bench.reports:ViaEdgeResult",
    "vllm-bench-serve": "composegen.bench.reports:VllmBenchServeResult",
    "ladder": "composegen.evidence.reports.ladder:LadderResult",
    "qualify": "composegen.evidence.reports.qualify:QualifyResult",
    "qualify-alias": "composegen.edge.reports:ProofReport",
    "report": "composegen.evidence.reports.runs:RunsReport",
    "shm": "composegen.shm.reports:ShmScan",
    "shm-reclaim": "composegen.shm.reports:ShmReclaim",
    "startup": "composegen.vllm.reports:StartupCheck",
    "cache": "composegen.stack.reports:CacheReport",
    "plan": "composegen.evidence.reports.plan:PlanResult",
    "gate": "composegen.evidence.reports.gate:GateResult",
    "doctor": "composegen.provision.reports:DoctorReport",
    "comparison": "composegen.campaign.reports:ComparisonReport",
    "qualification": "composegen.campaign.reports:QualificationReport",
    "campaign-state": "composegen.campaign.reports:CampaignState",
    "keys": "composegen.edge.reports:ClientsReport",
    "edge-status": "composegen.edge.reports:EdgeStatusReport",
    "promote": "composegen.edge.reports:SwitchReport",
    "rollback": "composegen.edge.reports:SwitchReport",
    "edge-recover": "composegen.edge.reports:RecoverReport",
    "wake": "composegen.edge.reports:RecoverReport",
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
