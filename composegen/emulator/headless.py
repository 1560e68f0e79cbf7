"""A worker node of a multi-node emulated engine (--headless), and what the head logs on its loss.

The join protocol and failure behaviour are in cluster.py; `log` is runner.Log (level, source,
message, proc)."""

from __future__ import annotations

import time
from collections.abc import Callable

from composegen.emulator import cluster
from composegen.emulator.memory import MemoryPlan, free_memory_line, gib

LogFn = Callable[..., None]
_NCCL = "NCCL error: remote process exited or there was a network error"


def log_worker_death(log: LogFn, head: cluster.Head) -> None:
    """What the head prints when a remote worker is gone (vLLM's executor monitor, then NCCL)."""
    rank, peer, reason = head.lost or (0, "?", "unknown")
    a, core = head.launch, "EngineCore_DP0"
    workers = ", ".join(f"Worker_TP{r}" for r in cluster.ranks_of(rank, a.world_size, a.nnodes))
    died = f"Worker proc {workers} on node rank {rank} ({peer}) died unexpectedly"
    log("ERROR", "multiproc_executor.py:243", f"{died}, shutting down executor. ({reason})", core)
    log("ERROR", "core.py:912", "EngineCore encountered a fatal error.", core)
    log("ERROR", "core.py:912", f"RuntimeError: {_NCCL} (node rank {rank}; emulated)", core)
    gone = "Engine core proc EngineCore_DP0 died unexpectedly, shutting down client."
    log("ERROR", "core_client.py:623", gone)


def serve_headless(
    log: LogFn,
    values: dict,
    plan: MemoryPlan,
    load_s: float,
    fault: str | None,
    member: cluster.Member,
) -> int:
    """A worker node: join, load this node's shard when the head says so, stay until the head ends."""
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
                illegal = "CUDA error: an illegal memory access was encountered (emulated fault)"
                log("ERROR", "gpu_worker.py:120", f"torch.AcceleratorError: {illegal}", procs[0])
                return 1
        else:
            head = f"{member.launch.addr}:{member.launch.port}"
            ready = f"Node rank {member.launch.rank} is ready; serving the head at {head}"
            log("INFO", "multiproc_executor.py:249", ready)
    member.wait(member.ended)
    if member.clean_end:
        log("INFO", "multiproc_executor.py:252", "The head node shut down; exiting.")
        return 0
    a, where = member.launch, "multiproc_executor.py:255"
    lost = f"Lost the connection to the head node at {a.addr}:{a.port} ({member.lost_reason})"
    log("ERROR", where, f"{lost}; shutting down this node's workers.")
    log("ERROR", where, f"RuntimeError: {_NCCL} (head node rank 0; emulated)")
    return 1


def _shard_lines(
    model: str, plan: MemoryPlan, load_s: float
) -> list[tuple[float, list[tuple[str, str]]]]:
    """(fraction of the load time, [(source, message)]) for a worker node's own ranks."""
    shards = "Loading safetensors checkpoint shards: {}% Completed | {}/4"
    took = f"Model loading took {gib(plan.weights_gib)} GiB memory"
    kv = f"Available KV cache memory: {gib(plan.kv_gib)} GiB"
    secs = max(1, round(0.1 * load_s))
    graphs = f"Graph capturing finished in {secs} secs, took {gib(plan.cudagraph_gib)} GiB"
    return [
        (0.0, [("gpu_model_runner.py:2738", f"Starting to load model {model}...")]),
        *((0.1 * n, [("default_loader.py:291", shards.format(25 * n, n))]) for n in range(1, 5)),
        (0.5, [("gpu_model_runner.py:2779", took)]),
        (0.7, [("gpu_worker.py:340", free_memory_line(plan)), ("gpu_worker.py:346", kv)]),
        (0.9, [("gpu_model_runner.py:3617", graphs)]),
    ]
