"""Evidence bundles (write, verify, tamper) and the A/B comparison of the seed's two arms."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime

import pytest

from composegen import ledger, render
from composegen.errors import BadInput, CheckFailed
from composegen.evidence import bundle as evidence
from composegen.evidence import compare
from composegen.evidence.reports.compare import CompareReport
from composegen.evidence.reports.gate import GateResult
from composegen.evidence.reports.ladder import LadderResult
from composegen.profiles import resolve as profile
from composegen.project import Project
from composegen.stack.reports import LiveIdentity
from composegen.vllm import startup
from composegen.vllm.reports import StartupReport
from tests.support.helpers import make_project

ARM_8192 = "vllm-0.33.0-r33-8192-arm.log"
ARM_4096 = "vllm-0.33.0-r33-4096-arm.log"


@pytest.fixture
def project(tmp_path) -> Project:
    make_project(tmp_path, {}, copy_shipped=True)
    return Project(tmp_path)


@pytest.fixture
def seed_runs(project, data_dir):
    a = evidence.from_log(project, "8192-131k", data_dir / "logs" / ARM_8192)
    b = evidence.from_log(project, "4096-131k", data_dir / "logs" / ARM_4096)
    return a, b


def _row(result: CompareReport, metric: str) -> dict:
    return next(r.to_json() for r in result.rows if r.metric == metric)


def test_seed_arms_reproduce_the_results_table(project, seed_runs):
    result = compare.compare_runs(*seed_runs, root=project.root)
    expected = {  # metric: (a, b, delta, pct) — the seed's Results table
        "min_rank_kv_gib": (15.27, 15.99, 0.72, 4.715),
        "kv_cache_tokens": (283_917, 553_243, 269_326, 94.861),
        "max_concurrency": (2.17, 4.22, 2.05, None),
        "peak_activation_gib": (1.73, 1.14, -0.59, -34.104),
        "weights_gib": (75.64, 75.51, -0.13, None),
    }
    for metric, (a, b, delta, pct) in expected.items():
        row = _row(result, metric)
        assert (row["a"], row["b"]) == (a, b), metric
        assert row["delta"] == pytest.approx(delta, abs=1e-9), metric
        assert row["pct"] == pct, metric
    flag = result.unexplained_capacity_change.to_json()
    assert flag == {"flag": True, "kv_bytes_pct": 4.715, "kv_tokens_pct": 94.861, "threshold": 0.10}
    functional = result.config.functional
    assert [(c.path, c.before, c.after) for c in functional] == [
        ("services.vllm.command.--max-num-batched-tokens", 8192, 4096)
    ]
    # port, served name and container name changed for evidence identity
    assert result.config.identity
    markdown = compare.format_markdown(result)
    for cell in (
        "+0.72 GiB / +4.715%",
        "+269,326 / +94.861%",
        "+2.05x",
        "-0.59 GiB / -34.104%",
        "-0.13 GiB",
        "Reported concurrency at 131,072 tokens",
    ):
        assert cell in markdown
    assert "unexplained capacity change: YES" in compare.format_text(result)


def test_threshold_decides_the_flag(project, seed_runs):
    result = compare.compare_runs(*seed_runs, root=project.root, threshold=0.95)
    assert result.unexplained_capacity_change.flag is False


def _report(tokens: int, gib: float) -> StartupReport:
    return StartupReport(
        kv_cache_tokens=tokens,
        kv_cache_gib_min=gib,
        max_concurrency=round(tokens / 131072, 2),
        max_model_len=131072,
        weights_gib=75.5,
        peak_activation_gib=1.1,
        ready=True,
        errors=[],
    )


def _ladder(prompt: int, ttft: float, decode: float) -> LadderResult:
    small = {
        "target": 1000,
        "prompt_tokens": 1000,
        "ttft_s": 0.2,
        "prefill_tok_s": 5000.0,
        "decode_tok_s": 99.0,
        "finish_reason": "stop",
        "ok": True,
    }
    big = {
        "target": prompt,
        "prompt_tokens": prompt,
        "ttft_s": ttft,
        "prefill_tok_s": round(prompt / ttft, 1),
        "decode_tok_s": decode,
        "finish_reason": "stop",
        "ok": True,
    }
    return LadderResult.model_validate(
        {"targets": [big, small], "largest_prompt_tokens": prompt, "ok": True}
        | {"model": "m", "max_model_len": 131072, "max_tokens": 16, "tolerance": 0.05}
    )


def test_bytes_and_tokens_moving_together_is_not_flagged_and_ladder_rows_compare(project):
    r = profile.load(project, "4096-131k")
    gates = GateResult.model_validate(
        {"passed": 6, "total": 6, "gates": [], "tools": {"passed": 20, "total": 20}, "ok": True}
        | {"model": "m", "base_url": "http://127.0.0.1:8000"}
    )
    a = evidence.write_run(
        project,
        r,
        startup_log_text=None,
        startup_report=_report(500_000, 15.0),
        gates=gates,
        ladder=_ladder(119_503, 17.445, 73.86),
    )
    b = evidence.write_run(
        project,
        r,
        startup_log_text=None,
        startup_report=_report(550_000, 16.5),
        gates=gates,
        ladder=_ladder(119_503, 17.364, 75.20),
    )
    result = compare.compare_runs(a, b, root=project.root)
    assert result.unexplained_capacity_change.flag is False  # +10% bytes, +10% tokens
    assert _row(result, "gates")["a"] == "6/6" and _row(result, "gates")["delta"] == 0
    assert _row(result, "largest_prompt_tokens")["delta"] == 0
    ttft = _row(result, "largest_ttft_s")
    assert (ttft["a"], ttft["b"]) == (17.445, 17.364)  # taken from the largest row, not the first
    assert ttft["pct"] == round((17.364 - 17.445) / 17.445 * 100, 3)
    assert _row(result, "largest_decode_tok_s")["pct"] == round((75.20 - 73.86) / 73.86 * 100, 3)
    assert result.config.functional == [] and result.config.identity == []
    assert "| Functional gates | 6/6 | 6/6 | unchanged pass |" in compare.format_markdown(result)


def test_bundle_layout_hashes_and_unknowns(project, seed_runs, data_dir):
    run = seed_runs[1]
    assert run.parent == project.runs_dir and run.name.endswith("-4096-131k")
    assert datetime.strptime(run.name[:16], "%Y%m%dT%H%M%SZ")
    doc = evidence.load_run(run).as_read()  # the document as written
    assert doc["schema"] == "composegen.evidence/v1" and doc["source"] == "log"
    assert doc["profile"] == {"name": "4096-131k", "hash": profile.load(project, "4096-131k").hash}
    # what the log's engine got
    assert doc["model_revision"] == "9e165c30e2704aec5d9d593cce3eebd58bbef1cb"
    # a log does not say what that host ran
    assert doc["image_digest"] is None and doc["compose_sha256"] is None
    assert {"gates", "ladder", "image_digest", "compose_sha256"} <= set(doc["unknown"])
    log_bytes = (data_dir / "logs" / ARM_4096).read_bytes()
    raw = {e["file"]: e for e in doc["raw"]}
    assert raw["startup.log"] == {
        "file": "startup.log",
        "sha256": hashlib.sha256(log_bytes).hexdigest(),
        "bytes": len(log_bytes),
    }
    assert (
        doc["startup"]["kv_cache_tokens"]
        == startup.parse_startup_log(log_bytes.decode()).kv_cache_tokens
    )
    assert not [p for p in project.runs_dir.iterdir() if p.name.startswith(".tmp")]


def test_stack_run_records_the_rendered_compose_and_pinned_image(project):
    r = profile.load(project, "4096-131k")
    ledger.write(project, {r.name: render.render(r)})
    when = datetime(2026, 8, 10, 12, 0, 0, tzinfo=UTC)
    pinned = r.profile.image.split("@")[1]
    container = LiveIdentity(
        hash=r.hash,
        image_id="sha256:" + "e" * 64,
        emulated=False,
        repo_digests=["mirror.example/vllm@sha256:" + "f" * 64, f"voipmonitor/vllm@{pinned}"],
    )
    first = evidence.write_run(
        project,
        r,
        startup_log_text="log",
        startup_report=StartupReport(),
        now=when,
        container=container,
    )
    second = evidence.write_run(
        project, r, startup_log_text="log", startup_report=StartupReport(), now=when
    )
    assert (
        first.name == "20260810T120000Z-4096-131k" and second.name == "20260810T120000Z-4096-131k-2"
    )
    doc = evidence.load_run(first).as_read()
    assert (
        doc["compose_sha256"] == hashlib.sha256(project.out_path(r.name).read_bytes()).hexdigest()
    )
    assert doc["image_digest"] == pinned and doc["model_revision"] == r.profile.model.revision
    assert doc["container"] == container.to_json() and doc["emulated"] is False
    assert doc["unknown"] == ["gates", "ladder"]
    # Without the running container, nothing vouches for the image: null and listed as unknown.
    assert (
        evidence.load_run(second).image_digest is None
        and "image_digest" in evidence.load_run(second).unknown
    )
    # a run name under runs/
    assert evidence.load_run(first.name, project.root).path == str(first)


def test_tampering_is_caught(project, seed_runs):
    run = seed_runs[0]
    (run / "startup.log").write_text("edited", encoding="utf-8")
    with pytest.raises(CheckFailed, match="sha256"):
        evidence.load_run(run)
    (run / "startup.log").unlink()
    with pytest.raises(CheckFailed, match="missing"):
        evidence.load_run(run)


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "evidence: missing"),
        (
            '{"schema": "composegen.evidence/v1",\n "raw": [',
            r"evidence.json:2: evidence: invalid JSON",
        ),
        ('{"schema": "other/v9"}', "schema: expected"),
        ('{"schema": "composegen.evidence/v1", "profile": {}}', "startup: required key is missing"),
    ],
)
def test_malformed_bundles_are_bad_input(tmp_path, content, message):
    run = tmp_path / "runs" / "x"
    run.mkdir(parents=True)
    if content is not None:
        (run / "evidence.json").write_text(content, encoding="utf-8")
    with pytest.raises(BadInput, match=message):
        evidence.load_run(run)


def test_missing_runs_and_logs_are_bad_input(project, tmp_path):
    with pytest.raises(BadInput, match="no such run"):
        compare.compare_runs("nope-a", "nope-b", root=project.root)
    with pytest.raises(BadInput, match="no such file"):
        evidence.from_log(project, "4096-131k", tmp_path / "absent.log")
    junk = tmp_path / "junk.log"
    junk.write_text("hello\nworld\n", encoding="utf-8")
    with pytest.raises(BadInput, match="not a vLLM startup log"):
        evidence.from_log(project, "4096-131k", junk)


def test_a_deleted_profile_leaves_a_note_not_a_crash(project, seed_runs):
    (project.profiles_dir / "4096-131k.yaml").unlink()
    result = compare.compare_runs(*seed_runs, root=project.root)
    assert result.config.functional == []
    assert any("4096-131k" in note for note in result.config.notes)
    assert _row(result, "kv_cache_tokens")["delta"] == 269_326
    json.dumps(result.to_json())  # JSON-able throughout
