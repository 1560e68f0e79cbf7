"""A worker node of a multi-node emulated engine (--headless), and what the head logs when one is
lost.

The join protocol and failure behaviour are in cluster.py; `log` is runner.Log (level, source,
message, proc).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from composegen.emulator import cluster
from composegen.emulator.memory import MemoryPlan, free_memory_line, gib

LogFn = Callable[..., None]


def log_worker_death(log: LogFn, head: cluster.Head) -> None:
    """What the head prints when a remote worker is gone (vLLM's executor monitor, then NCCL)."""
    rank, peer, reason = head.lost or (0, "?", "unknown")
    workers = ", ".join(
        f"Worker_TP{r}" for r in cluster.ranks_of(rank, head.launch.world_size, head.launch.nnodes)
    )
    log(
        "ERROR",
        "multiproc_executor.py:243",
        f"Worker proc {workers} on node rank {rank} ({peer}) died unexpectedly, shutting down executor. ({reason})",
        "EngineCore_DP0",
    )
    log("ERROR", "core.py:912", "EngineCore encountered a fatal error.", "EngineCore_DP0")
    log(
        "ERROR",
        "core.py:912",
        f"RuntimeError: NCCL error: remote process exited or there was a network error (node rank {rank}; emulated)",
        "EngineCore_DP0",
    )
    log(
        "ERROR",
        "core_client.py:623",
        "Engine core proc EngineCore_DP0 died unexpectedly, shutting down client.",
    )


def serve_headless(
    log: LogFn,
    values: dict,
    plan: MemoryPlan,
    load_s: float,
    fault: str | None,
    member: cluster.Member,
) -> int:
    """A worker node: join, load this node's shard when the head says so, then stay until the head
    stops."""
    member.join()
    if member.wait(member.started):
        started, model = time.monotonic(), values["model"]
        procs = [f"Worker_TP{r}" for r in member.launch.local_ranks]
        for fraction, lines in _shard_lines(model, plan, load_s):
            if member.ended.wait(max(0.0, started + fraction * load_s - time.monotonic())):
                break
            for source, message in lines:
                for proc in procs:
                    log("INFO", source, message, proc)
            if fault == "crash_during_load" and fraction == 0.2:
                log(
                    "ERROR",
                    "gpu_worker.py:120",
                    "torch.AcceleratorError: CUDA error: an illegal memory access was encountered (emulated fault)",
                    procs[0],
                )
                return 1
        else:
            log(
                "INFO",
                "multiproc_executor.py:249",
                f"Node rank {member.launch.rank} is ready; serving the head "
                f"at {member.launch.addr}:{member.launch.port}",
            )
    member.wait(member.ended)
    if member.clean_end:
        log("INFO", "multiproc_executor.py:252", "The head node shut down; exiting.")
        return 0
    a = member.launch
    log(
        "ERROR",
        "multiproc_executor.py:255",
        f"Lost the connection to the head node at {a.addr}:{a.port} "
        f"({member.lost_reason}); shutting down this node's workers.",
    )
    log(
        "ERROR",
        "multiproc_executor.py:255",
        "RuntimeError: NCCL error: remote process exited or there was a network error (head node rank 0; emulated)",
    )
    return 1


def _shard_lines(
    model: str, plan: MemoryPlan, load_s: float
) -> list[tuple[float, list[tuple[str, str]]]]:
    """(fraction of the load time, [(source, message)]) for a worker node's own ranks."""
    steps = [
        (
            0.1 * step,
            [
                (
                    "default_loader.py:291",
                    f"Loading safetensors checkpoint shards: {25 * step}% Completed | {step}/4",
                )
            ],
        )
        for step in range(1, 5)
    ]
    return [
        (0.0, [("gpu_model_runner.py:2738", f"Starting to load model {model}...")]),
        *steps,
        (
            0.5,
            [
                (
                    "gpu_model_runner.py:2779",
                    f"Model loading took {gib(plan.weights_gib)} GiB memory",
                )
            ],
        ),
        (
            0.7,
            [
                ("gpu_worker.py:340", free_memory_line(plan)),
                ("gpu_worker.py:346", f"Available KV cache memory: {gib(plan.kv_gib)} GiB"),
            ],
        ),
        (
            0.9,
            [
                (
                    "gpu_model_runner.py:3617",
                    f"Graph capturing finished in {max(1, round(0.1 * load_s))} "
                    f"secs, took {gib(plan.cudagraph_gib)} GiB",
                )
            ],
        ),
    ]
