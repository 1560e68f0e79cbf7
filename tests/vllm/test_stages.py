"""Stages of a vLLM start read from real recorded logs and from the emulator's staged load (no engine)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from composegen.emulator import loading
from composegen.emulator.memory import MemoryInputs, plan_memory
from composegen.emulator.runner import Log
from composegen.vllm import stages
from tests.support import stagelog

# copied unchanged from shared/real-vllm
REAL = Path(__file__).resolve().parents[1] / "data" / "real-0.26.0-h200"
GRAPHS = REAL.with_name("real-0.26.0-h200-graphs")  # the same, CUDA graphs and torch.compile on


def _real(name: str) -> str:
    return (REAL / name).read_text(encoding="utf-8")


def _keys(tracker: stages.StageTracker) -> list[str]:
    return [row["stage"] for row in tracker.view(tracker.last_line_at or 0)]


def test_real_eager_start_has_weights_kv_api_ready_and_durations_from_the_log():
    tracker = stagelog.from_log(stagelog.logged_times(_real("serve-bf16-eager.log")))
    # --enforce-eager: no compile/graphs
    assert _keys(tracker) == ["imports", "weights", "kv_cache", "api", "ready"]
    rows = {r["stage"]: r for r in tracker.view(tracker.last_line_at or 0)}
    assert (rows["weights"]["done"], rows["weights"]["total"], rows["weights"]["unit"]) == (
        1,
        1,
        "shards",
    )
    assert rows["weights"]["rate"] == pytest.approx(234.95)  # tqdm's own rate field
    assert rows["imports"]["elapsed_s"] == 25.0  # 15:51:16 → 15:51:41 (Loading model from scratch)
    # Model loading took (…42) → init engine took (…54)
    assert rows["kv_cache"]["elapsed_s"] == 12.0
    assert tracker.summary() == "ready" and tracker.failed is None


def test_real_graphs_start_has_every_stage_with_capture_and_warm_up_apart():
    tracker = stagelog.from_log(
        stagelog.logged_times((GRAPHS / "serve-hermes-graphs.log").read_text(encoding="utf-8"))
    )
    rows = {r["stage"]: r for r in tracker.view(tracker.last_line_at or 0)}
    assert list(rows) == [
        "imports",
        "weights",
        "compile",
        "kv_cache",
        "graphs",
        "warmup",
        "api",
        "ready",
    ]
    seconds = {key: row["elapsed_s"] for key, row in rows.items()}
    # from the log's own timestamps: banner 18:54:43, shard bar 18:55:25, compile 18:55:29-37 (profiling around
    # it), capture 18:55:39 → `Graph capturing finished in 1 secs` 18:55:40 → `init engine … took` 18:55:49
    assert seconds == {
        "imports": 42.0,
        "weights": 1.0,
        "compile": 8.0,
        "kv_cache": 5.0,
        "graphs": 1.0,
        "warmup": 9.0,
        "api": 2.0,
        "ready": 0.0,
    }
    assert (rows["graphs"]["done"], rows["graphs"]["total"], rows["graphs"]["detail"]) == (
        3,
        3,
        "FULL",
    )
    assert tracker.failed is None  # the hermes tracebacks after ready are requests, not the start
    assert tracker.summary() == "ready"


def test_the_imports_stage_starts_at_the_launch_when_it_is_known():
    lines = stagelog.logged_times((GRAPHS / "serve-hermes-graphs.log").read_text(encoding="utf-8"))
    # the container started 30 s before vLLM's banner (Python's imports)
    launch = lines[0][0] - 30.0
    tracker = stagelog.from_log(lines, started_at=launch)
    imports = tracker.stages["imports"]
    assert imports.first_at == launch and imports.seconds == 72.0
    live = stages.StageTracker(0.0)
    live.begin("create", 0.0)
    live.launched(2.0)  # the container runs: creating is over, the imports run silently
    assert (
        live.current is not None
        and live.current.key == "imports"
        and live.stages["create"].seconds == 2.0
    )
    live.feed(lines[0][1], 40.0)
    assert live.current.key == "imports" and live.stages["imports"].first_at == 2.0


def test_real_failed_start_is_failed_in_the_profiling_stage():
    tracker = stagelog.from_log(stagelog.logged_times(_real("serve-failed-missing-module.log")))
    assert tracker.failed == "EngineCore failed to start."
    assert tracker.current is not None and tracker.current.key == "kv_cache"
    assert "ready" not in _keys(tracker)


@pytest.mark.parametrize(
    ("line", "done", "total", "rate", "eta"),
    [
        (
            "(EngineCore pid=1) Loading safetensors checkpoint shards:   0% Completed | 0/46 [00:00<?, ?it/s]",
            0,
            46,
            None,
            None,
        ),
        (
            "Loading safetensors checkpoint shards:  39% Completed | 18/46 [01:12<01:52,  4.00s/it]",
            18,
            46,
            0.25,
            112.0,
        ),
        (
            "2026-11-30T15:51:41.123456789Z Loading pt checkpoint shards: 50% Completed | 1/2 [00:01<00:01,  1.50it/s]",
            1,
            2,
            1.5,
            1.0,
        ),
    ],
)
def test_tqdm_weight_lines_give_k_of_n_rate_and_the_engines_own_eta(line, done, total, rate, eta):
    tracker = stages.StageTracker(0.0)
    tracker.feed(line, 10.0)
    row = next(r for r in tracker.view(10.0) if r["stage"] == "weights")
    assert (row["done"], row["total"], row["rate"], row["eta_s"]) == (done, total, rate, eta)


def test_carriage_return_redraws_keep_the_last_state_and_a_rate_is_measured_when_tqdm_has_none():
    tracker = stages.StageTracker(0.0, timeout_s=600)
    bar = "Capturing CUDA graphs (decode, FULL): {p}%|##| {k}/35"
    tracker.feed("\r".join(bar.format(p=p, k=k) for p, k in ((0, 0), (20, 7))), 100.0)
    tracker.feed("\r" + bar.format(p=40, k=14), 101.0)
    graphs = tracker.stages["graphs"]
    assert (graphs.done, graphs.total, graphs.detail) == (14, 35, "decode, FULL")
    assert graphs.rate == pytest.approx(7.0) and graphs.eta(101.0) == pytest.approx(3.0)
    assert tracker.time_left(101.0) == pytest.approx(499.0)
    assert tracker.summary() == "CUDA graph capture 14/35"


def _emulated_log(tmp_path, monkeypatch, **values) -> str:
    monkeypatch.setenv("EMU_WEIGHT_SHARDS", "5")
    buf = io.StringIO()
    values = {"model": "m", "max_num_batched_tokens": 2048, **values}
    assert loading.load(Log(buf), values, plan_memory(values, MemoryInputs()), None, 0.3)
    return buf.getvalue()


def test_the_emulated_load_shows_every_stage_in_vllms_order(tmp_path, monkeypatch):
    text = _emulated_log(tmp_path, monkeypatch)
    tracker = stages.StageTracker(0.0)
    for i, line in enumerate(text.splitlines()):
        tracker.feed(line, float(i))
    assert _keys(tracker) == [
        "imports",
        "download",
        "weights",
        "compile",
        "kv_cache",
        "graphs",
        "warmup",
        "api",
    ]
    assert (tracker.stages["weights"].done, tracker.stages["weights"].total) == (5, 5)
    assert tracker.stages["graphs"].detail == "decode, FULL"
    # vLLM's bar format
    assert "Loading safetensors checkpoint shards:  40% Completed | 2/5 [" in text
    assert "torch.compile took" in text and "Graph capturing finished in" in text


def test_an_emulated_eager_load_has_neither_compile_nor_graph_capture(tmp_path, monkeypatch):
    text = _emulated_log(tmp_path, monkeypatch, enforce_eager=True)
    tracker = stages.StageTracker(0.0)
    for i, line in enumerate(text.splitlines()):
        tracker.feed(line, float(i))
    assert "compile" not in _keys(tracker) and "graphs" not in _keys(tracker)
    assert "(compilation:" not in text  # as in the recorded eager start


def test_bad_shard_setting_fails_the_start_with_a_message(monkeypatch):
    monkeypatch.setenv("EMU_WEIGHT_SHARDS", "zero")
    buf = io.StringIO()
    values = {"model": "m"}
    assert not loading.load(Log(buf), values, plan_memory(values, MemoryInputs()), None, 0.1)
    assert "EMU_WEIGHT_SHARDS='zero'" in buf.getvalue()


def test_a_multi_node_head_waits_for_its_nodes_with_k_of_n():
    tracker = stages.StageTracker(0.0)
    head = "(APIServer pid=7) INFO 11-30 15:00:0{s} [multiproc_executor.py:131] {msg}"
    tracker.feed(
        head.format(
            s=1,
            msg="Multi-node launch: node rank 0 of 3 (head), world size 6; master listening "
            "on 10.0.0.1:29501, waiting for 2 remote node(s)",
        ),
        1.0,
    )
    assert tracker.summary() == "waiting for nodes 1/3 nodes"
    tracker.feed(
        head.format(
            s=6, msg="Waiting for remote nodes to join (2/3 nodes ready); missing node rank(s) [2]"
        ),
        6.0,
    )
    assert tracker.summary() == "waiting for nodes 2/3 nodes"
    tracker.feed(
        "(Worker_TP0 pid=9) Loading safetensors checkpoint shards:  25% Completed | 1/4", 9.0
    )
    assert tracker.current is not None and tracker.current.key == "weights"
    assert tracker.stages["nodes"].elapsed(9.0) == 8.0
