"""One GPU shared by emulated engines (composegen/sizing/ledger.py), as the H200 recording ran two
engines at --gpu-memory-utilization 0.60 on one GPU (tests/data/real-0.26.0-h200-sleep/): the second
starts only beside a sleeping first; beside an awake one it fails with vLLM's startup memory check; a
wake that does not fit fails as vLLM's cumem allocator does and leaves the engine asleep."""

from __future__ import annotations

import json
import signal

import httpx

from tests.emulator.test_sleep import RECORDED, SLEEP, sleeper

H200 = "139.81"  # nvidia-smi's 143,771 MiB, as vLLM prints it


def _engine(start, ledger, name: str, ready: bool = True):
    return sleeper(start, *SLEEP, ready=ready, VLLM_SERVER_DEV_MODE="1", EMU_GPU_GIB=H200,
                   EMU_GPU_LEDGER=str(ledger), EMU_GPU_IDS="0", EMU_GPU_ENGINE=name)  # fmt: skip


def _held(ledger) -> dict[str, tuple[str, float]]:
    docs = [json.loads(p.read_text()) for p in ledger.glob("*.json")]
    return {d["engine"]: (d["state"], d["gib"]) for d in docs}


def test_a_start_beside_an_awake_engine_fails_as_vllm_and_fits_beside_a_sleeping_one(
    start, tmp_path
):
    ledger = tmp_path / "gpus"
    ledger.mkdir()
    a = _engine(start, ledger, "a")
    assert _held(ledger) == {"a": ("awake", 83.886)}  # 0.6 x 139.81

    refused = _engine(start, ledger, "b", ready=False)
    assert refused.proc.wait(timeout=30) == 1
    refused.wait_for("Failed core proc(s)")  # the log reader may lag behind the exit
    assert (
        "ValueError: Free memory on device cuda:0 (55.92/139.81 GiB) on startup is less than desired "
        "GPU memory utilization (0.6, 83.89 GiB). Decrease GPU memory utilization or reduce GPU memory "
        "used by other processes." in refused.log
    )
    assert "Failed core proc(s): {'EngineCore_DP0': 1}" in refused.log
    assert set(_held(ledger)) == {"a"}  # a refused engine holds nothing

    assert httpx.post(f"{a.url}/sleep?level=1", timeout=30).status_code == 200
    assert _held(ledger) == {"a": ("asleep", 0.87)}  # the recorded residue
    b = _engine(start, ledger, "b")
    # the profiling line shows what the sleeping engine left (139.81 - 0.87)
    assert "Free memory on device (138.94/139.81 GiB) on startup." in b.log

    # A's wake does not fit beside the awake B: vLLM's cumem error, HTTP 500, A still asleep
    woken = httpx.post(f"{a.url}/wake_up", timeout=30)
    assert woken.status_code == 500
    a.wait_for(
        "CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62"
    )  # (its reader lags)
    assert httpx.get(f"{a.url}/is_sleeping", timeout=10).json() == {"is_sleeping": True}

    # the switch as the recording did it: B sleeps, A wakes
    assert httpx.post(f"{b.url}/sleep?level=1", timeout=30).status_code == 200
    assert httpx.post(f"{a.url}/wake_up", timeout=30).status_code == 200
    assert _held(ledger) == {"a": ("awake", 83.886), "b": ("asleep", 0.87)}

    assert a.stop() == 0  # a clean stop leaves the ledger
    assert set(_held(ledger)) == {"b"}


def test_an_engine_killed_outright_no_longer_counts(start, tmp_path):
    ledger = tmp_path / "gpus"
    ledger.mkdir()
    a = _engine(start, ledger, "a")
    a.stop(signal.SIGKILL)  # no cleanup: its entry stays, but nobody holds its lock
    assert (ledger / "a.json").exists()
    b = _engine(start, ledger, "b")
    assert "Free memory on device (139.81/139.81 GiB) on startup." in b.log


def test_the_ledger_follows_the_recorded_switches(start, tmp_path):
    """The recording's 10 level-1 switches (sleep.json `l1`), replayed: after every step each engine holds
    what nvidia-smi showed for its process, asleep within 10 MiB (the residue), awake within 1% (vLLM's
    process holds ~0.56 GiB of CUDA context beyond its 0.60 share: not part of the share the check uses)."""
    recorded = json.loads((RECORDED / "sleep.json").read_text())
    ledger = tmp_path / "gpus"
    ledger.mkdir()
    engines = {"tiny-a": _engine(start, ledger, "a")}
    assert httpx.post(f"{engines['tiny-a'].url}/sleep?level=1", timeout=30).status_code == 200
    engines["tiny-b"] = _engine(start, ledger, "b")  # as recorded: B started beside the sleeping A
    pids = {"946": "a", "1296": "b"}  # the recording's processes: A, B

    def matches(step: dict) -> None:
        held = _held(ledger)
        for app in step["apps"]:
            pid, mib = app.split(",")
            state, gib = held[pids[pid]]
            assert abs(gib * 1024 - int(mib)) <= (10 if state == "asleep" else 0.01 * int(mib)), (
                app,
                held,
            )

    matches(recorded["start"]["gpu"])
    for cycle in recorded["l1"]:
        asleep, awake = engines[cycle["sleep"]], engines[cycle["wake"]]
        assert httpx.post(f"{asleep.url}/sleep?level=1", timeout=30).status_code == 200
        matches(cycle["gpu_after_sleep"])
        assert httpx.post(f"{awake.url}/wake_up", timeout=30).status_code == 200
        matches(cycle["gpu_after_wake"])
    assert len(recorded["l1"]) == 10
