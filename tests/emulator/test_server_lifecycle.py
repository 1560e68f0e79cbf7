"""Emulator start-up and shutdown: the memory model's log lines, /dev/shm files, fault switches."""

from __future__ import annotations

import json
import math
import re
import signal
import time
from pathlib import Path

import httpx

from .test_server import READY, WEATHER, ask, stream

PREFIX = re.compile(
    r"^(?:\((?P<proc>\w+) pid=(?P<pid>\d+)\)\s+)?(?P<lvl>DEBUG|INFO|WARNING|ERROR|CRITICAL) "
    r"(?P<ts>\d\d-\d\d \d\d:\d\d:\d\d) \[(?P<src>[^\]]+):(?P<ln>\d+)\] (?P<msg>.*)$"
)
R33 = (
    "deepseek-ai/DeepSeek-V4-Flash",
    "-tp",
    "2",
    "--gpu-memory-utilization",
    "0.975",
    "--max-model-len",
    "131072",
    "--max-num-batched-tokens",
)
GiB = 1 << 30


def numbers(log: str) -> dict:
    """What a log-reading planner extracts, with the fact sheet's regexes."""

    def grab(pattern: str) -> str:
        match = re.search(pattern, log)
        assert match, f"{pattern!r} not in log:\n{log}"
        return match.group(1)

    return {
        "weights": float(grab(r"Model loading took ([\d.]+) GiB(?: memory)? and")),
        "kv": float(grab(r"Available KV cache memory: (-?[\d.]+) GiB")),
        "tokens": int(grab(r"(?:GPU|GPU \+ host) KV cache size: ([\d,]+) tokens").replace(",", "")),
        "concurrency": grab(r"Maximum concurrency for [\d,]+ tokens per request: ([\d.]+)x"),
        "free_total": grab(r"Free memory on device \(([\d.]+/[\d.]+) GiB\)"),
        "desired": grab(r"Desired GPU memory utilization is \(([\d.]+, [\d.]+) GiB\)"),
        "weight_usage": float(grab(r"([\d.]+) GiB for weight")),
        "activation": float(grab(r"([\d.]+) GiB for peak activation")),
    }


def holders(path: Path) -> set[int]:
    pids = set()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if str(path) in (proc / "maps").read_text():
                    pids.add(int(proc.name))
            except OSError:
                pass
    return pids


def test_memory_model_reproduces_the_4096_arm(start):
    emu = start(*R33, "4096")
    got = numbers(emu.log)
    assert got["weights"] == 75.51 and got["activation"] == 1.14 and got["kv"] == 15.99
    assert got["tokens"] == 553_243 and got["concurrency"] == "4.22"
    assert got["free_total"] == "95.01/95.01" and got["desired"] == "0.975, 92.64"
    assert (
        "GPU KV cache size: 553,243 tokens, Maximum concurrency for 131,072 tokens per request: 4.22x"
        in emu.log
    )
    assert re.search(
        r"init engine \(profile, create kv cache, warmup model\) took [\d.]+ s", emu.log
    )
    assert "Starting vLLM server on http://127.0.0.1:" in emu.log
    assert "'max_num_batched_tokens': 4096" in emu.log
    for line in emu.lines:
        tqdm = re.match(
            r"\(\w+ pid=\d+\)(?: .*(?:\d+% Completed \||\d+%\|.*\|) \d+/\d+ \[.*)?$", line
        )
        # tqdm bars as in real logs
        assert PREFIX.match(line) or line.startswith("(APIServer pid=") or tqdm, line
    assert httpx.get(f"{emu.url}/v1/models").json()["data"][0]["max_model_len"] == 131072


def test_memory_model_8192_arm_and_host_offload(start):
    baseline = numbers(start(*R33, "8192", EMU_WEIGHTS_GIB="75.64").log)
    assert (
        baseline["activation"] == 1.73 and baseline["kv"] == 15.27 and baseline["weights"] == 75.64
    )
    assert baseline["tokens"] < 553_243  # less KV memory, fewer tokens
    offload = start(*R33, "4096", "--kv-offloading-size", "16", EMU_OFFLOAD_MAX_BYTES="65536")
    assert "GPU + host KV cache size:" in offload.log
    host_tokens = 8 * GiB / 31028.131  # 16 GiB across TP=2 -> 8 GiB per rank, same bytes per token
    assert abs(numbers(offload.log)["tokens"] - (553_243 + host_tokens)) <= 1


def test_memory_failures_exit_1_like_vllm(start):
    no_room = start("m", "--gpu-memory-utilization", "0.5", ready=False)
    assert no_room.proc.wait(timeout=20) == 1
    assert "No available memory for the cache blocks" in no_room.log and READY not in no_room.log
    assert list(no_room.shm_dir.iterdir()) == []  # a failed start cleans up
    too_long = start("m", "--max-model-len", "1m", ready=False)  # 1m = 1,000,000
    assert too_long.proc.wait(timeout=20) == 1
    match = re.search(
        r"To serve at least one request with the model's max seq len \(1000000\), \(([\d.]+) GiB KV "
        r"cache is needed, which is larger than the available KV cache memory \(([\d.]+) GiB\)\. "
        r"Based on the available memory, the estimated maximum model length is (\d+)\.",
        too_long.log,
    )
    assert match, too_long.log
    assert float(match.group(1)) > float(match.group(2))
    # defaults: 0.92 × 95.0125 GiB − 75.51 weights − (0.55 + 0.59/4096 × 8192) activation, 31028.131 B/token
    kv_gib = 0.92 * 95.0125 - 75.51 - (0.55 + 0.59 / 4096 * 8192)
    assert int(match.group(3)) == math.floor(kv_gib * GiB / 31028.131)


def test_shm_files_held_by_workers_and_removed_on_sigterm(start):
    emu = start("m", "-tp", "2", "--kv-offloading-size", "1", EMU_OFFLOAD_MAX_BYTES=str(1 << 20))
    names = sorted(p.name for p in emu.shm_dir.iterdir())
    # broadcast + 2 workers
    assert sum(bool(re.fullmatch(r"psm_[0-9a-f]{8}", n)) for n in names) == 3
    offload = [n for n in names if re.fullmatch(r"vllm_offload_[0-9a-f]{32}\.mmap", n)]
    assert len(offload) == 1 and (emu.shm_dir / offload[0]).stat().st_size == 1 << 20
    pids = holders(emu.shm_dir / offload[0])
    assert emu.proc.pid in pids and len(pids) >= 3  # API server + EngineCore + workers
    assert emu.stop(signal.SIGTERM) == 0
    assert list(emu.shm_dir.iterdir()) == []
    assert "Application shutdown complete." in emu.log


def test_sigkill_of_the_process_group_leaves_shm_files(start):
    emu = start("m", "--kv-offloading-size", "1", EMU_OFFLOAD_MAX_BYTES=str(1 << 20))
    before = sorted(p.name for p in emu.shm_dir.iterdir())
    pids = holders(emu.shm_dir / next(n for n in before if n.startswith("vllm_offload_")))
    emu.stop(signal.SIGKILL)
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{pid}").exists() for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sorted(p.name for p in emu.shm_dir.iterdir()) == before  # leftovers, as with vLLM


def test_crash_never_ready_and_slow_ready(start):
    crash = start("m", ready=False, EMU_FAULT="crash_during_load")
    assert crash.proc.wait(timeout=20) == 1
    assert (
        "CUDA error: an illegal memory access was encountered" in crash.log
        and READY not in crash.log
    )
    stuck = start("m", ready=False, EMU_FAULT="never_ready")
    time.sleep(1.5)
    assert stuck.proc.poll() is None and not stuck.port_open() and READY not in stuck.log
    assert stuck.stop(signal.SIGTERM) == 0 and list(stuck.shm_dir.iterdir()) == []
    began = time.monotonic()
    slow = start("m", EMU_FAULT="slow_ready", EMU_SLOW_FACTOR="4")
    assert time.monotonic() - began >= 1.1  # 0.3 s × 4
    assert httpx.get(f"{slow.url}/health").status_code == 200


def test_health_turns_503_and_engine_errors(start):
    emu = start("m", EMU_FAULT="health_503_after", EMU_FAULT_AFTER_S="1.5")
    assert httpx.get(f"{emu.url}/health").status_code == 200
    time.sleep(1.7)
    assert httpx.get(f"{emu.url}/health").status_code == 503
    failed = httpx.post(f"{emu.url}/v1/chat/completions", json={"messages": ask("hi")})
    assert failed.status_code == 500 and failed.json()["error"]["type"] == "InternalServerError"
    assert "EngineDeadError" in emu.log


def test_broken_tool_stream(start):
    emu = start(
        "m",
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        "hermes",
        EMU_FAULT="broken_tool_stream",
    )
    chunks = stream(emu, messages=ask("weather in Oslo"), tools=WEATHER)
    fragments = [
        c["choices"][0]["delta"]["tool_calls"][0]["function"].get("arguments", "")
        for c in chunks
        if c["choices"] and c["choices"][0]["delta"].get("tool_calls")
    ]
    try:
        json.loads("".join(fragments))
        parsed = True
    except ValueError:
        parsed = False
    assert not parsed
    assert chunks[-1]["choices"][0]["finish_reason"] != "tool_calls"
