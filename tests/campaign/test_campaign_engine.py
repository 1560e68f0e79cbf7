"""Campaigns on the real engine with the emulated vLLM: a bracketed A/B from one command, interrupted by
Ctrl-C in the middle of the candidate's load and resumed without redoing the control; exclusive mode; a
qualification arm whose GPU-only start falls short (emulated KV pool below the context) and its fallback."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid

import jsonschema
import pytest

from composegen.campaign import state
from tests.support.campaigns import emulated_ab, own_gpu_ids
from tests.support.cli import run_cli
from tests.support.engine import force_remove, free_port
from tests.support.helpers import REPO, make_project

pytestmark = pytest.mark.docker


def _schema(name: str) -> dict:
    res = run_cli("schema", "--report", name)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def _running(container: str) -> bool:
    res = subprocess.run(
        ["docker", "ps", "-q", "--filter", f"name=^{container}$", "--filter", "status=running"],
        capture_output=True,
        text=True,
    )
    return bool(res.stdout.strip())


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_bracketed_campaign_survives_ctrl_c_in_the_candidates_load(tmp_path):
    root, control, candidate = emulated_ab(tmp_path, candidate_load=8.0)
    assert run_cli("--root", str(root), "render").returncode == 0
    directory = root / "runs" / "campaigns" / "ab"
    argv = [sys.executable, "-m", "composegen", "--root", str(root), "campaign", "run", control, candidate,
            "--bracket", "--gate", "--tools", "2", "--ladder", "2000", "--emulate", "--name", "ab"]  # fmt: skip
    try:
        proc = subprocess.Popen(
            argv, cwd=REPO, env={**os.environ, "NO_COLOR": "1"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True, text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while not (
            (directory / state.LOG).is_file()
            and "candidate: up" in (directory / state.LOG).read_text()
            and _running(f"{candidate}-ctr")
        ):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.2)
        time.sleep(1.0)  # well inside the candidate's 8 s load
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C at a terminal reaches the whole process group
        _, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 130, stderr
        assert "interrupted during the candidate arm" in stderr and "campaign resume ab" in stderr
        st = state.load(directory)
        assert [(a.key, a.status) for a in st.arms] == [
            ("control", "done"),
            ("candidate", "running"),
            ("bracket", "pending"),
        ]
        control_evidence = _sha(directory / "control" / "evidence.json")

        res = run_cli("--root", str(root), "campaign", "resume", "ab", timeout=300)
        assert res.returncode == 0, res.stderr
        log = (directory / state.LOG).read_text()
        assert (
            log.count("control: up") == 1
            and "control" in res.stderr
            and "not run again" in res.stderr
        )
        assert "candidate: attaching" in log  # its load went on: nothing was loaded twice
        assert _sha(directory / "control" / "evidence.json") == control_evidence
        st = state.load(directory)
        assert all(a.status == "done" for a in st.arms)
        assert st.bracket is not None and st.bracket.passed and st.bracket.exact
        # the replay found what the control's start compiled in their one cache volume (issue 47)
        bundle = json.loads((directory / "bracket" / "evidence.json").read_text())
        assert bundle["comparability"]["engine_start"] == "warm", bundle["comparability"]

        md = (directory / "campaign.md").read_text()
        assert "EMULATED" in md.split("## Outcome")[0]
        assert "A fresh bracketed replay reproduced" in md and "Decision: undecided" in md
        assert "| Peak activation per rank | 1.73 GiB | 1.14 GiB | -0.59 GiB / -34.104% |" in md
        doc = json.loads((directory / "comparison.json").read_text())
        jsonschema.validate(doc, _schema("comparison"))
        text = (directory / "comparison.json").read_text() + md
        for arm in ("control", "candidate", "bracket"):
            ev = json.loads((directory / arm / "evidence.json").read_text())
            assert ev["emulated"] is True
            # container/image IDs stay private
            assert ev["container"]["image_id"].split(":")[-1][:12] not in text
            assert {
                "arm": arm,
                "file": "startup.log",
                "sha256": _sha(directory / arm / "startup.log"),
            }.items() <= {
                **next(e for e in doc["raw"] if e["arm"] == arm and e["file"] == "startup.log")
            }.items()
        host = socket.gethostname()
        assert len(host) < 3 or host not in text
        assert str(tmp_path) not in text

        res = run_cli("--root", str(root), "campaign", "show", "ab", "--json")
        assert res.returncode == 0 and json.loads(res.stdout) == doc
        res = run_cli(
            "--root",
            str(root),
            "campaign",
            "decide",
            "ab",
            "--promote",
            "--why",
            "more KV, same gates",
        )
        assert res.returncode == 0, res.stderr
        decided = json.loads((directory / "decision.json").read_text())
        assert decided["profile"] == candidate and decided["evidence_sha256"] == _sha(
            directory / "comparison.json"
        )
    finally:
        for name in (control, candidate):
            force_remove(f"composegen-{name}")


HOLDER = """\
image: example/vllm@sha256:{digest}
model: {{id: org/tiny-model, revision: {rev}, served_name: {name}-served}}
service:
  port: {{host: {port}}}
  gpus: {{device_ids: ["{gpu}"]}}
  shm_size: 1gb
  stop_grace_period: 2s
vllm: {{max-model-len: 8192, max-num-batched-tokens: 4096, max-num-seqs: 1}}
emulate: {{env: {{EMU_LOAD_SECONDS: "0.5"}}}}
"""


def test_exclusive_mode_refuses_while_another_stack_holds_a_gpu(tmp_path):
    gpus = own_gpu_ids(2)
    root, control, candidate = emulated_ab(tmp_path, gpus=gpus)
    holder = f"h{uuid.uuid4().hex[:6]}"
    text = HOLDER.format(digest="c" * 64, rev="d" * 40, name=holder, port=free_port(), gpu=gpus[1])
    make_project(root, {holder: text})
    assert run_cli("--root", str(root), "render").returncode == 0
    try:
        up = run_cli("--root", str(root), "up", holder, "--emulate", timeout=300)
        assert up.returncode == 0, up.stderr
        res = run_cli(
            "--root", str(root), "campaign", "run", control, candidate, "--emulate", timeout=300
        )
        assert res.returncode == 3, res.stderr
        assert f"composegen stack {holder}" in res.stderr and f"holds GPU {gpus[1]}" in res.stderr
        assert not _running(f"{control}-ctr")  # nothing was started
        st = state.load(root / "runs" / "campaigns" / f"{control}-vs-{candidate}")
        assert st.arms[0].status == "failed" and "exclusive mode" in (st.arms[0].error or "")
    finally:
        run_cli("--root", str(root), "down", holder, timeout=120)
        for name in (holder, control, candidate):
            force_remove(f"composegen-{name}")


QUALIFY_GPU = """\
description: qualification test, GPU-only 16K context (its emulated KV pool falls short)
image: example/vllm@sha256:{digest}
model: {{id: org/tiny-model, revision: {rev}, served_name: {name}-served}}
service:
  port: {{host: {port}}}
  gpus: {{device_ids: ["48"]}}
  shm_size: 5gb
  stop_grace_period: 2s
  startup_timeout: 120
vllm:
  max-model-len: 16384
  max-num-batched-tokens: 4096
  max-num-seqs: 1
  gpu-memory-utilization: 0.975
  enable-auto-tool-choice: true
  tool-call-parser: deepseek_v4
qualify:
  min_prompt_tokens: 12001
  gates: [smoke, json, tools]
  tools: 2
emulate:
  env:
    EMU_LOAD_SECONDS: "0.5"
    EMU_GPU_GIB: "10"
    EMU_WEIGHTS_GIB: "8.4"
    EMU_PREFILL_TOK_S: "100000"
"""
QUALIFY_OFFLOAD = """\
description: its fallback, the same with a 2 GiB host KV tier
extends: {gpu}
model: {{served_name: {name}-served}}
service: {{port: {{host: {port}}}}}
vllm: {{kv-offloading-size: 2, kv-offloading-backend: native}}
"""


def test_a_gpu_only_start_that_falls_short_runs_its_fallback_and_records_both(tmp_path):
    tag = uuid.uuid4().hex[:6]
    gpu, offload = f"q{tag}-gpu", f"q{tag}-offload"
    root = make_project(
        tmp_path,
        {
            gpu: QUALIFY_GPU.format(digest="c" * 64, rev="d" * 40, name=gpu, port=free_port()),
            offload: QUALIFY_OFFLOAD.format(gpu=gpu, name=offload, port=free_port()),
        },
    )
    assert run_cli("--root", str(root), "render").returncode == 0
    try:
        res = run_cli(
            "--root",
            str(root),
            "campaign",
            "qualify",
            gpu,
            "--fallback",
            offload,
            "--emulate",
            timeout=300,
        )
        assert res.returncode == 0, res.stderr
        directory = root / "runs" / "campaigns" / f"qualify-{gpu}"
        st = state.load(directory)
        assert [(a.key, a.status, a.qualified) for a in st.arms] == [
            ("primary", "done", False),
            ("fallback", "done", True),
        ]
        doc = json.loads((directory / "qualification.json").read_text())
        jsonschema.validate(doc, _schema("qualification"))
        primary, fallback = doc["arms"]
        assert doc["qualified_arm"] == "fallback" and doc["qualified_profile"] == offload
        assert (
            primary["started"] is False
            and primary["kv_pool_estimate"] < primary["max_model_len"] == 16384
        )
        failed = {c["name"] for c in primary["criteria"] if not c["passed"]}
        assert {"startup", "kv_pool", "long_prompt", "gates"} <= failed
        assert fallback["kv_cache_tokens"] >= 16384 and fallback["probe"]["prompt_tokens"] > 12000
        assert all(fallback["probe"][k] for k in ("ttft_s", "prefill_tok_s", "decode_tok_s"))
        assert {c["name"] for c in fallback["criteria"]} >= {
            "kv_pool",
            "long_prompt",
            "gates",
            "tools",
        }
        md = (directory / "campaign.md").read_text()
        assert f"{offload} (fallback arm) qualified." in md and f"{gpu} did not qualify" in md
        assert "The engine refused to start: its KV pool holds" in md
        for name in (gpu, offload):  # both stacks were taken down
            assert not _running(f"composegen-{name}-vllm-1")
        res = run_cli("--root", str(root), "campaign", "resume", f"qualify-{gpu}", timeout=120)
        # nothing is qualified twice
        assert res.returncode == 0 and res.stderr.count("not run again") == 2
    finally:
        for name in (gpu, offload):
            force_remove(f"composegen-{name}")
