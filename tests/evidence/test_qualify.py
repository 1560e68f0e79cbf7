"""qualify: on the emulator (a profile that fits, one whose memory does not, one whose pool is too small)
and on the seed's recorded logs with stand-in request functions."""

from __future__ import annotations

import functools
import math

import pytest

from composegen.errors import EngineError
from composegen.evidence import bundle as evidence
from composegen.evidence import capture, gates, ladder, qualify
from composegen.evidence.reports.gate import GateResult
from composegen.evidence.reports.ladder import LadderResult
from composegen.evidence.reports.qualify import QualifyResult
from composegen.profiles import resolve as profile
from composegen.project import Project
from composegen.vllm import startup
from composegen.vllm.reports import StartupReport
from tests.support.emulator_proc import EmulatorProc
from tests.support.helpers import MINIMAL, make_project

EMU_PROFILE = (
    MINIMAL.replace("served_name: tiny", "served_name: emu-q")
    + """\
  enable-auto-tool-choice: true
  tool-call-parser: deepseek_v4
qualify:
  min_prompt_tokens: 3000
  ladder_targets: [1000, 2000]
  tools: 4
"""
)


@pytest.fixture
def project(tmp_path) -> Project:
    huge_pool = EMU_PROFILE.replace("qualify:\n", "qualify:\n  min_kv_tokens: 50000000\n")
    make_project(tmp_path, {"emu": EMU_PROFILE, "emu-huge-pool": huge_pool}, copy_shipped=True)
    return Project(tmp_path)


def _qualify_on_emulator(
    project: Project, tmp_path, name: str, env: dict | None = None
) -> QualifyResult:
    r = profile.load(project, name)
    with EmulatorProc.start(tmp_path, serve_args=r.argv(), env=env) as emu:
        log = emu.log_text()
        report = startup.parse_startup_log(log)
        return qualify.qualify(
            project,
            r,
            startup_report=report,
            startup_log_text=log,
            run_ladder_fn=functools.partial(
                ladder.run_ladder, emu.base_url, r.profile.model.served_name
            ),
            run_gates_fn=functools.partial(
                gates.run_gates, emu.base_url, r.profile.model.served_name
            ),
        )


def _criteria(result: QualifyResult) -> dict:
    return {c["name"]: c for c in result.to_json()["criteria"]}


def test_a_profile_that_fits_qualifies_and_leaves_evidence(project, tmp_path):
    result = _qualify_on_emulator(project, tmp_path, "emu")
    crit = _criteria(result)
    assert list(crit) == ["startup", "config", "kv_pool", "long_prompt", "ladder", "gates", "tools"]
    assert [c.name for c in result.criteria if not c.passed] == []
    assert result.qualified is True and qualify.exit_code(result) == 0
    # default: max-model-len
    assert crit["kv_pool"]["threshold"] == 4096 and crit["kv_pool"]["measured"] > 4096
    assert crit["long_prompt"]["measured"] >= 3000 and crit["long_prompt"]["threshold"] == 3000
    assert (crit["ladder"]["measured"], crit["gates"]["measured"], crit["tools"]["measured"]) == (
        2,
        6,
        4,
    )
    doc = evidence.load_run(result.run).as_read()  # hashes verify
    assert doc["profile"]["name"] == "emu" and doc["source"] == "stack"
    assert [row["target"] for row in doc["ladder"]["targets"]] == [
        qualify.probe_target(3000, 4096),
        1000,
        2000,
    ]
    assert doc["ladder"]["largest_prompt_tokens"] == crit["long_prompt"]["measured"]
    assert doc["gates"]["ok"] is True
    raw_files = {e["file"] for e in doc["raw"]}
    assert raw_files >= {"startup.log", "startup.json", "gates.json", "ladder.json", "qualify.json"}
    assert "QUALIFIED" in qualify.format_text(result)


def test_a_profile_whose_memory_does_not_fit_is_not_qualified(project, tmp_path):
    result = _qualify_on_emulator(project, tmp_path, "emu", env={"EMU_WEIGHTS_GIB": "87.5"})
    crit = _criteria(result)
    assert result.qualified is False and qualify.exit_code(result) == 1
    assert crit["startup"]["passed"] is False and "no_cache_memory" in crit["startup"]["reason"]
    assert crit["kv_pool"]["passed"] is False
    for name in ("long_prompt", "ladder", "gates", "tools"):
        assert crit[name]["passed"] is False and crit[name]["reason"].startswith("not run")
    doc = evidence.load_run(result.run).as_read()
    assert doc["gates"] is None and {"gates", "ladder"} <= set(doc["unknown"])


def test_a_pool_below_min_kv_tokens_fails_only_that_criterion(project, tmp_path):
    result = _qualify_on_emulator(project, tmp_path, "emu-huge-pool")
    failed = [c.name for c in result.criteria if not c.passed]
    assert failed == ["kv_pool"] and result.qualified is False
    assert _criteria(result)["kv_pool"]["threshold"] == 50_000_000


class _Stand:
    """Stand-in request functions for recorded logs: they record their calls and answer like a server would."""

    def __init__(self, largest: int, gates_ok: bool = True, gates_error: str | None = None):
        self.ladder_calls, self.gates_calls = [], []
        self.largest, self.gates_ok, self.gates_error = largest, gates_ok, gates_error

    def ladder(self, targets, *, max_model_len):
        self.ladder_calls.append((list(targets), max_model_len))
        rows = [
            {
                "target": t,
                "prompt_tokens": min(t, self.largest),
                "finish_reason": "stop",
                "ok": t <= self.largest,
                "reason": None if t <= self.largest else "HTTP 400: too long",
            }
            for t in targets
        ]
        largest = max(r["prompt_tokens"] for r in rows)
        shape = {
            "model": "stand",
            "max_model_len": max_model_len,
            "max_tokens": 64,
            "tolerance": 0.005,
        }
        return LadderResult.model_validate(
            {**shape, "targets": rows, "largest_prompt_tokens": largest, "ok": True}
        )

    def gates(self, *, only, tools):
        self.gates_calls.append((list(only), tools))
        if self.gates_error:
            raise EngineError(self.gates_error)
        rows = [
            {
                "name": n,
                "passed": self.gates_ok,
                "latency_s": 0.1,
                "reason": None if self.gates_ok else "x",
                "details": {},
            }
            for n in only
        ]
        return GateResult.model_validate(
            {
                "model": "stand",
                "base_url": "http://stand",
                "gates": rows,
                "passed": sum(r["passed"] for r in rows),
                "total": len(rows),
                "tools": {"passed": tools if self.gates_ok else 0, "total": tools},
                "ok": self.gates_ok,
            }
        )


def _recorded(data_dir, name: str) -> tuple[StartupReport, str]:
    text = (data_dir / "logs" / name).read_text(encoding="utf-8")
    return startup.parse_startup_log(text), text


def test_recorded_4096_log_against_the_393k_criteria(project, data_dir):
    report, text = _recorded(data_dir, "vllm-0.33.0-r33-4096-arm.log")
    stand = _Stand(largest=301_600)
    r = profile.load(project, "393k-gpu")
    result = qualify.qualify(
        project,
        r,
        startup_report=report,
        startup_log_text=text,
        source="log",
        run_ladder_fn=stand.ladder,
        run_gates_fn=stand.gates,
    )
    probe = math.ceil(300_001 / 0.995) + 1
    # probe first, then the ladder
    assert stand.ladder_calls == [([probe], 393_216), ([300_500], 393_216)]
    assert stand.gates_calls == [(["smoke", "json", "tools", "continuation"], 3)]  # after the probe
    crit = _criteria(result)
    assert crit["kv_pool"] == {
        "name": "kv_pool",
        "measured": 553_243,
        "threshold": 393_216,
        "passed": True,
        "reason": None,
    }
    assert crit["long_prompt"]["measured"] == probe
    # The 4,096 arm ran 131,072 tokens of context: it cannot qualify the 393K profile's configuration.
    assert (
        crit["config"]["passed"] is False
        and "max-model-len: profile 393216, engine 131072" in crit["config"]["reason"]
    )
    assert result.qualified is False


def test_a_short_probe_and_a_dead_engine_are_failures_with_reasons(project, data_dir):
    report, text = _recorded(data_dir, "vllm-0.33.0-r33-4096-arm.log")
    stand = _Stand(largest=299_000, gates_error="engine died: connection refused")
    result = qualify.qualify(
        project,
        profile.load(project, "393k-gpu"),
        startup_report=report,
        startup_log_text=text,
        run_ladder_fn=stand.ladder,
        run_gates_fn=stand.gates,
    )
    crit = _criteria(result)
    assert crit["long_prompt"]["passed"] is False and crit["long_prompt"]["measured"] == 299_000
    assert crit["gates"]["passed"] is False and "engine died" in crit["gates"]["reason"]
    assert result.qualified is False
    assert evidence.load_run(result.run).gates is None


def test_recorded_failed_startup_sends_no_requests(project, data_dir):
    report, text = _recorded(data_dir, "vllm-0.33.0-kv-too-small.log")
    stand = _Stand(largest=10**6)
    result = qualify.qualify(
        project,
        profile.load(project, "393k-gpu"),
        startup_report=report,
        startup_log_text=text,
        run_ladder_fn=stand.ladder,
        run_gates_fn=stand.gates,
    )
    assert stand.ladder_calls == [] and stand.gates_calls == []
    assert "kv_too_small_for_max_len" in _criteria(result)["startup"]["reason"]
    assert result.qualified is False


DOCKER_REST = """\
vllm:
  max-model-len: 8192
  max-num-batched-tokens: 4096
  max-num-seqs: 1
  enable-auto-tool-choice: true
  tool-call-parser: deepseek_v4
qualify:
  min_prompt_tokens: 6000
  ladder_targets: [2000]
  gates: [smoke, tools, stream_tools, continuation]
  tools: 3
emulate:
  env:
    EMU_LOAD_SECONDS: "0.5"
"""


@pytest.mark.docker
def test_capture_and_qualify_a_running_emulated_stack(tmp_path):
    import uuid

    from tests.support.cli import run_cli
    from tests.support.emulator_proc import free_port
    from tests.support.engine import force_remove, tiny_profile

    name = f"q-{uuid.uuid4().hex[:8]}"
    text = tiny_profile(f"{name}-served", f"{{host: {free_port()}}}", rest=DOCKER_REST)
    root = make_project(tmp_path, {name: text})
    assert run_cli("--root", str(root), "render", name).returncode == 0
    try:
        up = run_cli("--root", str(root), "up", name, "--emulate", timeout=600)
        assert up.returncode == 0, up.stderr
        project = Project(root)
        r = profile.load(project, name)
        run = capture.capture_stack(project, r, gate=True, ladder_targets=[1000], tools=3)
        doc = evidence.load_run(run).as_read()
        assert doc["source"] == "stack" and doc["startup"]["ready"] is True
        # The emulator image is a local build: no registry digest, and the bundle says it was emulated.
        assert (
            doc["image_digest"] is None
            and doc["emulated"] is True
            and doc["model_revision"] == "d" * 40
        )
        assert doc["container"]["hash"] == doc["profile"]["hash"]
        assert doc["compose_sha256"] == evidence._sha256(project.out_path(name).read_bytes())
        assert doc["gates"]["tools"] == {"passed": 3, "total": 3} and doc["ladder"]["ok"] is True
        result = qualify.qualify_stack(project, r)
        assert [c.name for c in result.criteria if not c.passed] == []
        assert result.qualified is True
    finally:
        run_cli("--root", str(root), "down", name, timeout=120)
        force_remove(f"composegen-{name}")
