"""Campaigns for tests: a finished A/B campaign made from the seed's recorded r33 arm logs (no engine), with
private topology planted in every raw file, and small emulated profiles for the engine tests."""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path

from composegen.campaign import runner, state
from composegen.campaign.reports import CampaignOptions
from composegen.errors import CheckFailed
from composegen.evidence import bundle as evidence
from composegen.evidence.reports.gate import GateResult
from composegen.evidence.reports.ladder import LadderResult
from composegen.profiles import resolve as profile
from composegen.project import Project
from composegen.stack.reports import LiveIdentity
from composegen.vllm import startup
from tests.support.engine import free_port
from tests.support.helpers import make_project

DATA = Path(__file__).resolve().parents[1] / "data" / "logs"
ARM_LOGS = {
    "8192-131k": "vllm-0.33.0-r33-8192-arm.log",
    "4096-131k": "vllm-0.33.0-r33-4096-arm.log",
}

# What an operator's raw evidence holds and a shared record must not (the test plants each).
PRIVATE = {
    "host": "gpu-node-07",
    "fqdn": "gpu-node-07.lab.example",
    "ipv4": "10.20.30.40",
    "ipv6": "fd00:1234:5678::42",
    "user": "alice",
    "home": "/home/alice",
    "gpu_uuid": "GPU-3f1c2a4b-9d8e-4c7b-a6f5-1e2d3c4b5a69",
    "serial": "1654321098765",
    "container_id": "4f0c7d3be21a" + "9" * 52,
}
PLANTED = (
    f"(APIServer pid=1) INFO node {PRIVATE['fqdn']} ({PRIVATE['ipv4']}, {PRIVATE['ipv6']}) user {PRIVATE['user']}"
    f" home {PRIVATE['home']}/.cache GPU0 {PRIVATE['gpu_uuid']} serial {PRIVATE['serial']}"
    f" container {PRIVATE['container_id']} host {PRIVATE['host']}\n"
)
CANDIDATE_ENV = f"""\
  environment:
    VLLM_HOST_IP: "{PRIVATE["ipv4"]}"
    NODE_NAME: "{PRIVATE["fqdn"]}"
    CACHE_DIR: "{PRIVATE["home"]}/hf-cache"
"""


def _gates(passed: bool) -> GateResult:
    reason = f"connect to {PRIVATE['ipv4']} on {PRIVATE['fqdn']} as {PRIVATE['user']} failed"
    rows = [
        {"name": "smoke", "passed": True, "latency_s": 0.1, "reason": None, "details": {}},
        {
            "name": "tools",
            "passed": passed,
            "latency_s": 0.2,
            "reason": None if passed else reason,
            "details": {},
        },
    ]
    return GateResult(
        model="ds4",
        base_url=f"http://{PRIVATE['ipv4']}:8000/v1",
        gates=rows,
        passed=1 + passed,
        total=2,
        tools=None,
        ok=passed,
    )


def _ladder() -> LadderResult:
    rows = [
        {"target": t, "tokenized": t, "prompt_tokens": t + 3, "ttft_s": 17.4, "prefill_tok_s": 7000.0,
         "decode_tok_s": 74.0, "e2e_s": 18.0, "completion_tokens": 64, "reasoning_tokens": 0,
         "finish_reason": "length", "ok": True, "reason": None}
        for t in (117500, 118500)
    ]  # fmt: skip
    rows.append(
        {
            "target": 119500,
            "ok": False,
            "reason": f"read timeout from {PRIVATE['ipv4']} ({PRIVATE['home']})",
        }
    )
    return LadderResult.model_validate({"model": "ds4", "max_model_len": 131072, "max_tokens": 64,
                                        "tolerance": 0.005, "ok": False, "targets": rows,
                                        "largest_prompt_tokens": 118503})  # fmt: skip


def seeded_campaign(
    tmp: Path, name: str = "seed-ab", plant_config: bool = True, benches: dict | None = None
) -> tuple[Project, Path]:
    """A finished bracketed campaign 8192-131k vs 4096-131k from the seed's recorded arm logs; PLANT_CONFIG:
    the candidate also carries private values in its environment (functional differences); BENCHES:
    {arm key: BenchResult} recorded into those arms' bundles."""
    root = make_project(tmp, {}, copy_shipped=True)
    candidate = root / "profiles" / "4096-131k.yaml"
    if plant_config:
        candidate.write_text(
            candidate.read_text(encoding="utf-8").replace(
                "service:\n", "service:\n" + CANDIDATE_ENV, 1
            )
        )
    project = Project(root)
    directory = runner.create(
        project,
        "8192-131k",
        "4096-131k",
        CampaignOptions(bracket=True, gate=True, ladder=[117500, 118500, 119500]),
        name,
    )
    st = state.load(directory)
    for arm in st.arms:
        r = profile.load(project, arm.profile)
        text = (DATA / ARM_LOGS[arm.profile]).read_text(encoding="utf-8") + PLANTED
        report = startup.parse_startup_log(text)
        report.server_address = f"http://{PRIVATE['ipv4']}:8000"
        container = LiveIdentity(hash=r.hash, image_id="sha256:" + PRIVATE["container_id"], repo_digests=[],
                                 emulated=False)  # fmt: skip
        made = evidence.write_run(
            project, r, startup_log_text=text, startup_report=report, gates=_gates(arm.key != "candidate"),
            ladder=_ladder(), container=container, bench=(benches or {}).get(arm.key),
        )  # fmt: skip
        os.replace(made, directory / arm.key)
        arm.status, arm.bundle, arm.finished_at = "done", arm.key, "2026-08-10T12:00:00Z"
    state.save(directory, st)
    # the planted failure: the candidate fails `tools`, which the control passed (exit 1, records written)
    with contextlib.suppress(CheckFailed):
        runner.finish(project, directory, st)
    return project, directory


EMU_CONTROL = """\
description: campaign test control, 8,192 batched tokens
image: example/vllm@sha256:{digest}
model:
  id: org/tiny-model
  revision: {rev}
  served_name: {name}-served
service:
  port: {{host: {port}}}
  container_name: {name}-ctr
  gpus: {{device_ids: [{gpus}]}}
  shm_size: 1gb
  stop_grace_period: 2s
  startup_timeout: 120
vllm:
  tensor-parallel-size: 2
  max-model-len: 131072
  max-num-batched-tokens: 8192
  max-num-seqs: 1
  gpu-memory-utilization: 0.975
  enable-auto-tool-choice: true
  tool-call-parser: deepseek_v4
emulate:
  env:
    EMU_LOAD_SECONDS: "{load}"
    EMU_WEIGHTS_GIB: "75.64"
"""
EMU_CANDIDATE = """\
description: campaign test candidate, 4,096 batched tokens
extends: {control}
model:
  served_name: {name}-served
service:
  port: {{host: {port}}}
  container_name: {name}-ctr
vllm:
  max-num-batched-tokens: 4096
emulate:
  env:
    EMU_LOAD_SECONDS: "{load}"
    EMU_WEIGHTS_GIB: "75.51"
"""


def own_gpu_ids(n: int) -> list[str]:
    """GPU ids (UUID-shaped, as the schema allows) that no other test declares: exclusive mode refuses an arm
    while another running stack holds one of its GPUs, and the suite runs tests side by side."""
    tag = uuid.uuid4().hex[:12]
    return [f"GPU-test-{tag}-{i}" for i in range(n)]


def emulated_ab(
    tmp: Path, *, gpus: list[str] | None = None, candidate_load: float = 1.0
) -> tuple[Path, str, str]:
    """A project with an emulated control/candidate pair on free ports, declaring GPUS (by default two of its
    own that no other test uses)."""
    gpus = ", ".join(f'"{g}"' for g in (gpus or own_gpu_ids(2)))
    tag = uuid.uuid4().hex[:6]
    control, candidate = f"c{tag}-8192", f"c{tag}-4096"
    texts = {
        control: EMU_CONTROL.format(
            digest="c" * 64, rev="d" * 40, name=control, port=free_port(), gpus=gpus, load=1.0
        ),
        candidate: EMU_CANDIDATE.format(
            control=control, name=candidate, port=free_port(), load=candidate_load
        ),
    }
    return make_project(tmp, texts), control, candidate
