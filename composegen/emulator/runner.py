"""`vllm serve …` for the emulator: parse argv, log a vLLM 0.33-shaped startup, then serve until SIGTERM.

Exit codes: 0 clean shutdown (SIGTERM/SIGINT), 1 engine failure (memory model error, emulated crash, port
in use, /dev/shm too small), 2 usage error (argv, EMU_* settings).

Environment:
  EMU_LOAD_SECONDS (2.0)   time from start to a listening port; log lines are spread over it
  EMU_FAULT                crash_during_load | never_ready | slow_ready | health_503_after | broken_tool_stream
  EMU_SLOW_FACTOR (5)      slow_ready multiplies the load time by this
  EMU_FAULT_AFTER_S (5)    health_503_after: seconds of health before /health turns 503
  EMU_MAX_WORKERS (4)      cap on forked worker processes (1 EngineCore + this node's TP×PP workers)
  EMU_HEARTBEAT_S (0.5), EMU_PEER_TIMEOUT_S (5), EMU_JOIN_TIMEOUT_S (600)   multi-node, see cluster.py
  VLLM_API_KEY             like --api-key
  plus memory.py's EMU_* memory inputs, shmfiles.py's EMU_SHM_DIR/EMU_OFFLOAD_MAX_BYTES and server.py's pacing.

Multi-node (--nnodes N > 1): the head (node rank 0) waits for every --headless worker node before it loads
and serves; a worker serves no HTTP. See cluster.py for the join protocol and the failure behaviour.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from composegen.emulator import cluster, shmfiles
from composegen.emulator.argv import parse_serve_args
from composegen.emulator.chat import ServingInfo
from composegen.emulator.memory import GiB, MemoryInputs, free_memory_line, gib, kv_size_line, plan_memory
from composegen.emulator.metrics import Metrics
from composegen.emulator.server import VERSION, Pacing, ServerState, make_server

FAULTS = ("crash_during_load", "never_ready", "slow_ready", "health_503_after", "broken_tool_stream")
ROUTES = {
    "/health": "GET",
    "/ping": "GET, POST",
    "/version": "GET",
    "/load": "GET",
    "/metrics": "GET",
    "/v1/models": "GET",
    "/tokenize": "POST",
    "/v1/chat/completions": "POST",
    "/v1/responses": "POST",
}


class _Stop(BaseException):
    """Raised from the SIGTERM/SIGINT handler so sleeps and serve_forever unwind into the cleanup."""


class Log:
    """vLLM 0.33 lines: `(<proc> pid=N) LEVEL MM-DD HH:MM:SS [file.py:line] msg`; uvicorn's `INFO:     msg`."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stdout
        self.pids = {"APIServer": os.getpid()}
        self._lock = threading.Lock()  # multi-node threads log too: whole lines only

    def __call__(self, level: str, source: str, message: str, proc: str = "APIServer") -> None:
        prefix = f"({proc} pid={self.pids.get(proc, os.getpid())})"
        if level == "INFO:":  # uvicorn's own format
            line = f"{prefix} INFO:     {message}"
        else:
            line = f"{prefix} {level} {time.strftime('%m-%d %H:%M:%S')} [{source}] {message}"
        with self._lock:
            self.stream.write(line + "\n")
            self.stream.flush()


def _top_level_error(message: str) -> int:
    parser = argparse.ArgumentParser(prog="vllm", usage="vllm [-h] [-v] {serve} ...")
    parser.error(message)  # exits 2
    return 2


def _env_float(env, name: str, default: float) -> float:
    raw = env.get(name)
    try:
        return float(raw) if raw not in (None, "") else default
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a number") from None


@dataclass
class Settings:
    """Everything read from EMU_* / VLLM_* variables, validated before anything starts."""

    fault: str | None
    inputs: MemoryInputs
    pacing: Pacing
    load_s: float
    fault_after_s: float
    max_workers: int
    offload_cap: int
    shm_dir: Path
    env_api_key: str | None
    timing: cluster.Timing

    @classmethod
    def from_env(cls, env) -> Settings:
        fault = env.get("EMU_FAULT") or None
        if fault and fault not in FAULTS:
            raise ValueError(f"EMU_FAULT={fault!r}: expected one of {', '.join(FAULTS)}")
        load_s = _env_float(env, "EMU_LOAD_SECONDS", 2.0)
        if fault == "slow_ready":
            load_s *= _env_float(env, "EMU_SLOW_FACTOR", 5.0)
        return cls(
            fault=fault,
            inputs=MemoryInputs.from_env(env),
            pacing=Pacing.from_env(env),
            load_s=load_s,
            fault_after_s=_env_float(env, "EMU_FAULT_AFTER_S", 5.0),
            max_workers=int(_env_float(env, "EMU_MAX_WORKERS", 4)),
            offload_cap=int(_env_float(env, "EMU_OFFLOAD_MAX_BYTES", shmfiles.DEFAULT_OFFLOAD_MAX_BYTES)),
            shm_dir=shmfiles.shm_dir(env),
            env_api_key=env.get("VLLM_API_KEY") or None,
            timing=cluster.Timing.from_env(env, _env_float),
        )


def main(argv: list[str] | None = None, env=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    env = os.environ if env is None else env
    if argv[:1] in (["-v"], ["--version"]):
        print(VERSION)
        return 0
    if not argv or argv[0] != "serve":
        return _top_level_error(
            f"argument subparser: invalid choice: {argv[0]!r} (choose from 'serve')"
            if argv
            else "the following arguments are required: subparser"
        )
    args = parse_serve_args(argv[1:])  # SystemExit(2) with `vllm serve: error: …`
    try:
        settings = Settings.from_env(env)
        launch = cluster.Launch.from_values(args.values)
    except ValueError as exc:
        print(f"vllm serve: error: {exc}", file=sys.stderr)
        return 2
    return _run(args.values, args.non_default, settings, launch)


def _run(values: dict, non_default: dict, settings: Settings, launch: cluster.Launch | None = None) -> int:
    files: list[shmfiles.ShmFile] = []
    pids: dict[str, int] = {}
    server = None
    head: cluster.Head | None = None
    member: cluster.Member | None = None
    clean = False

    def stop(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise _Stop()

    def peer_lost(signum, frame):
        raise cluster.PeerLost()

    # First thing: a SIGTERM right after the first log line must still end in a clean exit 0.
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log = Log()
    try:
        log(
            "INFO",
            "emulator.py:1",
            "composegen vLLM emulator: a TEST DOUBLE / DEMO MODE, not vLLM. No model is "
            "loaded and no GPU is used; memory numbers come from a model, replies from rules.",
        )
        model = values["model"]
        log("INFO", "api_server.py:1897", f"vLLM server version {VERSION}, serving model {model}")
        log("INFO", "utils.py:335", f"non-default args: {non_default!r}")
        plan = plan_memory(values, settings.inputs)
        tp = int(values.get("tensor_parallel_size") or 1)
        ranks = launch.local_ranks if launch else list(range(tp * int(values.get("pipeline_parallel_size") or 1)))
        ranks = ranks[: max(1, settings.max_workers - 1)]
        workers = len(ranks)
        # A headless node runs workers only; the engine core lives on the head.
        names = ([] if launch and launch.headless else ["EngineCore_DP0"]) + [f"Worker_TP{i}" for i in ranks]
        offload_bytes = int(float(values.get("kv_offloading_size") or 0) * GiB)
        sizes = shmfiles.planned_sizes(workers, offload_bytes, settings.offload_cap)
        problem = shmfiles.space_problem(settings.shm_dir, sizes)
        if problem:
            log("ERROR", "shm_broadcast.py:262", problem)
            return 1
        try:
            files = shmfiles.create_files(settings.shm_dir, sizes)
        except OSError as exc:
            log("ERROR", "shm_broadcast.py:262", f"Cannot create shared memory in {settings.shm_dir}: {exc}")
            return 1
        sys.stdout.flush()  # forked children must not inherit (and later repeat) buffered output
        shmfiles.start_workers(names, files, pids)
        log.pids.update(pids)
        if launch and launch.headless:
            member = cluster.Member(launch, settings.timing, log)
            return _serve_headless(log, values, plan, settings, member)
        if launch:
            head = cluster.Head(launch, settings.timing, log)
            signal.signal(signal.SIGUSR1, peer_lost)  # after the fork: only this process turns it into PeerLost
            head.on_lost = lambda: os.kill(os.getpid(), signal.SIGUSR1)
            head.listen()
            head.gather()
        if not _load(log, values, plan, settings.fault, settings.load_s):
            return 1
        host = values.get("host") or "0.0.0.0"
        port = int(values.get("port") or 8000)
        keys = list(values.get("api_key") or []) + ([settings.env_api_key] if settings.env_api_key else [])
        info = ServingInfo(
            model=model,
            served_names=list(values.get("served_model_name") or [model]),
            max_model_len=plan.max_model_len,
            auto_tool_choice=bool(values.get("enable_auto_tool_choice")),
            tool_parser=values.get("tool_call_parser"),
            reasoning_parser=values.get("reasoning_parser"),
            fault=settings.fault,
        )
        cache_labels = {
            "block_size": plan.block_size,
            "cache_dtype": values.get("kv_cache_dtype") or "auto",
            "gpu_memory_utilization": plan.utilization,
            "num_gpu_blocks": plan.num_gpu_blocks,
            "num_cpu_blocks": plan.num_cpu_blocks,
            "enable_prefix_caching": values.get("enable_prefix_caching") is not False,
        }
        state = ServerState(
            info=info,
            metrics=Metrics(info.name, plan.kv_tokens, cache_labels),
            log=log,
            api_keys=keys,
            pacing=settings.pacing,
            fault_after_s=settings.fault_after_s,
            access_log=not values.get("disable_uvicorn_access_log"),
        )
        try:
            server = make_server(host, port, state)  # bind + listen only now: the port was closed while loading
        except OSError as exc:
            log("ERROR", "api_server.py:1960", f"OSError: [Errno {exc.errno}] {exc.strerror} ({host}:{port})")
            return 1
        shown = f"[{host}]" if ":" in host else host
        log("INFO", "launcher.py:47", f"Starting vLLM server on http://{shown}:{port}")
        log("INFO", "launcher.py:51", "Available routes are:")
        for route, methods in ROUTES.items():
            log("INFO", "launcher.py:59", f"Route: {route}, Methods: {methods}")
        log("INFO:", "", f"Started server process [{os.getpid()}]")
        log("INFO:", "", "Waiting for application startup.")
        log("INFO:", "", "Application startup complete.")
        state.ready_at = time.monotonic()
        server.serve_forever(poll_interval=0.2)
        return 0
    except _Stop:
        clean = True
        if server is not None:
            for message in (
                "Shutting down",
                "Waiting for application shutdown.",
                "Application shutdown complete.",
                f"Finished server process [{os.getpid()}]",
            ):
                log("INFO:", "", message)
        return 0
    except cluster.ClusterError as exc:
        log("ERROR", "multiproc_executor.py:260", str(exc), "EngineCore_DP0" if head else "APIServer")
        return 1
    except cluster.PeerLost:
        _log_worker_death(log, head)
        return 1
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if head is not None:
            signal.signal(signal.SIGUSR1, signal.SIG_IGN)
            head.close(clean)  # a clean stop tells the workers; a failure just drops them
        if member is not None:
            member.close()
        if server is not None:
            server.server_close()
        shmfiles.stop_workers(pids)
        removed = shmfiles.unlink_files(files)
        if removed:
            log("INFO", "emulator.py:2", f"composegen emulator removed {len(removed)} shared-memory file(s)")


def _load(log: Log, values: dict, plan, fault: str | None, load_s: float) -> bool:
    """Emit the engine start-up lines over `load_s` seconds; False when the engine fails to start."""
    started = time.monotonic()
    model = values["model"]

    def at(fraction: float) -> None:
        delay = started + fraction * load_s - time.monotonic()
        if delay > 0:
            time.sleep(delay)

    log(
        "INFO",
        "core.py:98",
        f"Initializing a V1 LLM engine (v{VERSION}) with config: model='{model}', "
        f"max_seq_len={plan.max_model_len}, tensor_parallel_size="
        f"{values.get('tensor_parallel_size')}, kv_cache_dtype={values.get('kv_cache_dtype')}, "
        f"gpu_memory_utilization={plan.utilization}",
        "EngineCore_DP0",
    )
    log("INFO", "gpu_model_runner.py:2738", f"Starting to load model {model}...", "Worker_TP0")
    for step in range(1, 5):
        at(0.1 * step)
        log(
            "INFO",
            "default_loader.py:291",
            f"Loading safetensors checkpoint shards: {25 * step}% Completed | {step}/4",
            "Worker_TP0",
        )
        if fault == "crash_during_load" and step == 2:
            log("ERROR", "core.py:912", "EngineCore failed to start.", "EngineCore_DP0")
            log(
                "ERROR",
                "core.py:912",
                "torch.AcceleratorError: CUDA error: an illegal memory access was encountered (emulated fault)",
                "EngineCore_DP0",
            )
            log(
                "ERROR",
                "core.py:912",
                "CUDA kernel errors might be asynchronously reported at some other API "
                "call, so the stacktrace below might be incorrect.",
                "EngineCore_DP0",
            )
            log(
                "ERROR",
                "api_server.py:1960",
                "RuntimeError: Engine core initialization failed. See root cause "
                "above. Failed core proc(s): {'EngineCore_DP0': 1}",
            )
            return False
    while fault == "never_ready":  # stuck in loading; only a signal ends this
        time.sleep(5)
        log(
            "INFO",
            "default_loader.py:291",
            "Loading safetensors checkpoint shards: 100% Completed | 4/4 (still initializing)",
            "Worker_TP0",
        )
    at(0.5)
    log(
        "INFO",
        "gpu_model_runner.py:2779",
        f"Model loading took {gib(plan.weights_gib)} GiB memory and {time.monotonic() - started:.6f} seconds",
        "Worker_TP0",
    )
    at(0.7)
    if plan.kv_from_flag:
        log(
            "INFO",
            "gpu_worker.py:312",
            f"Initial free memory {gib(plan.free_gib)} GiB, reserved "
            f"{gib(plan.kv_gib)} GiB memory for KV Cache as specified by "
            "kv_cache_memory_bytes config and skipped memory profiling.",
            "Worker_TP0",
        )
    else:
        log("INFO", "gpu_worker.py:340", free_memory_line(plan), "Worker_TP0")
        log("INFO", "gpu_worker.py:346", f"Available KV cache memory: {gib(plan.kv_gib)} GiB", "Worker_TP0")
    if plan.error:
        log("ERROR", "core.py:912", "EngineCore failed to start.", "EngineCore_DP0")
        log("ERROR", "core.py:912", f"ValueError: {plan.error}", "EngineCore_DP0")
        log(
            "ERROR",
            "api_server.py:1960",
            "RuntimeError: Engine core initialization failed. See root cause above. "
            "Failed core proc(s): {'EngineCore_DP0': 1}",
        )
        return False
    at(0.8)
    log("INFO", "kv_cache_utils.py:1287", kv_size_line(plan), "EngineCore_DP0")
    at(0.9)
    log(
        "INFO",
        "gpu_model_runner.py:3617",
        f"Graph capturing finished in {max(1, round(0.1 * load_s))} secs, took {gib(plan.cudagraph_gib)} GiB",
        "Worker_TP0",
    )
    at(1.0)
    log(
        "INFO",
        "core.py:257",
        f"init engine (profile, create kv cache, warmup model) took {time.monotonic() - started:.2f} s",
        "EngineCore_DP0",
    )
    return True


def _log_worker_death(log: Log, head: cluster.Head) -> None:
    """What the head prints when a remote worker is gone (vLLM's executor monitor, then NCCL)."""
    rank, peer, reason = head.lost
    workers = ", ".join(f"Worker_TP{r}" for r in cluster.ranks_of(rank, head.launch.world_size, head.launch.nnodes))
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
    log("ERROR", "core_client.py:623", "Engine core proc EngineCore_DP0 died unexpectedly, shutting down client.")


def _serve_headless(log: Log, values: dict, plan, settings: Settings, member: cluster.Member) -> int:
    """A worker node: join, load this node's shard when the head says so, then stay until the head stops."""
    member.join()
    if member.wait(member.started):
        started, model = time.monotonic(), values["model"]
        procs = [f"Worker_TP{r}" for r in member.launch.local_ranks]
        for fraction, lines in _shard_lines(model, plan, settings):
            if member.ended.wait(max(0.0, started + fraction * settings.load_s - time.monotonic())):
                break
            for source, message in lines:
                for proc in procs:
                    log("INFO", source, message, proc)
            if settings.fault == "crash_during_load" and fraction == 0.2:
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


def _shard_lines(model: str, plan, settings: Settings) -> list[tuple[float, list[tuple[str, str]]]]:
    """(fraction of the load time, [(source, message)]) for a worker node's own ranks."""
    steps = [
        (
            0.1 * step,
            [("default_loader.py:291", f"Loading safetensors checkpoint shards: {25 * step}% Completed | {step}/4")],
        )
        for step in range(1, 5)
    ]
    return [
        (0.0, [("gpu_model_runner.py:2738", f"Starting to load model {model}...")]),
        *steps,
        (0.5, [("gpu_model_runner.py:2779", f"Model loading took {gib(plan.weights_gib)} GiB memory")]),
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
                    f"Graph capturing finished in {max(1, round(0.1 * settings.load_s))} "
                    f"secs, took {gib(plan.cudagraph_gib)} GiB",
                )
            ],
        ),
    ]
