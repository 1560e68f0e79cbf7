"""`vllm serve …` for the emulator: parse argv, log a vLLM 0.33-shaped startup, then serve until
SIGTERM.

Exit codes: 0 clean shutdown (SIGTERM/SIGINT), 1 engine failure (memory model error, emulated crash,
port in use, /dev/shm too small), 2 usage error (argv, EMU_* settings).

Environment:
  EMU_LOAD_SECONDS (2.0)   time from start to a listening port; log lines are spread over it
  EMU_FAULT                crash_during_load | never_ready | slow_ready | health_503_after | broken_tool_stream
                           | answers_changed (plain chat answers gain a word: the equivalence gate fails)
  EMU_SLOW_FACTOR (5)      slow_ready multiplies the load time by this
  EMU_FAULT_AFTER_S (5)    health_503_after: seconds of health before /health turns 503
  EMU_MAX_WORKERS (4)      cap on forked worker processes (1 EngineCore + this node's TP×PP workers)
  EMU_HEARTBEAT_S (0.5), EMU_PEER_TIMEOUT_S (5), EMU_JOIN_TIMEOUT_S (600)   multi-node, see cluster.py
  VLLM_API_KEY             like --api-key
  EMU_VLLM_VERSION (0.33.0)  the vLLM release imitated: 0.33.0 or 0.26.0 (see versions.py)
  plus memory.py's EMU_* memory inputs, shmfiles.py's EMU_SHM_DIR/EMU_OFFLOAD_MAX_BYTES and
  server.py's pacing.

Multi-node (--nnodes N > 1): the head (node rank 0) waits for every --headless worker node before it
loads and serves; a worker serves no HTTP. See cluster.py for the join protocol and the failure
behaviour."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from pathlib import Path
from types import FrameType
from typing import NoReturn, TextIO

from composegen.emulator import cluster, headless, loading, shmfiles, versions
from composegen.emulator.argv import parse_serve_args
from composegen.emulator.chat import ServingInfo
from composegen.emulator.memory import GiB, MemoryInputs, MemoryPlan, plan_memory, size_note
from composegen.emulator.metrics import Metrics
from composegen.emulator.server import ROUTES, VERSION, make_server
from composegen.emulator.server_state import Pacing, ServerState
from composegen.emulator.sleep import DEV_ROUTES, SleepMode, env_float
from composegen.sizing import ledger as gpuledger
from composegen.sizing.models import ModelFacts

FAULTS = (
    "crash_during_load",
    "never_ready",
    "slow_ready",
    "health_503_after",
    "broken_tool_stream",
    "sleep_residue_growth",
    "wake_fails",
    "draft_not_reloaded",
    "lora_corrupted",
    "answers_changed",
)


SHUTDOWN = (
    ("launcher.py:100", "API server: shutdown triggered"),
    ("launcher.py:116", "API server: stopping engine client mode=abort timeout=0s"),
    ("core_client.py:662", "MPClient: complete"),
    ("launcher.py:149", "API server: shutting down FastAPI HTTP server"),
)


class _Stop(BaseException):
    """Raised from the SIGTERM/SIGINT handler so sleeps and serve_forever unwind into the
    cleanup."""


class Log:
    """vLLM 0.33 lines: `(<proc> pid=N) LEVEL MM-DD HH:MM:SS [file.py:line] msg`; uvicorn's `INFO:     msg`."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout
        self.pids = {"APIServer": os.getpid()}
        self._lock = threading.Lock()  # multi-node threads log too: whole lines only

    def __call__(self, level: str, source: str, message: str, proc: str = "APIServer") -> None:
        prefix = f"({proc} pid={self.pids.get(proc, os.getpid())})"
        if level == "INFO:":  # uvicorn's own format
            line = f"{prefix} INFO:     {message}"
        elif not level:  # a progress-bar redraw (tqdm): the process tag only
            line = f"{prefix} {message}".rstrip()
        else:  # one prefix per line, as vLLM's logger formats each record line by line
            head = f"{prefix} {level} {time.strftime('%m-%d %H:%M:%S')} [{source}] "
            line = "\n".join(head + part for part in message.split("\n"))
        with self._lock:
            self.stream.write(line + "\n")
            self.stream.flush()


def _top_level_error(message: str) -> int:
    parser = argparse.ArgumentParser(prog="vllm", usage="vllm [-h] [-v] {serve} ...")
    parser.error(message)  # exits 2
    return 2


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
    # VLLM_SERVER_DEV_MODE=1: the dev routes (with --enable-sleep-mode: sleep mode)
    dev_mode: bool = False
    env: Mapping[str, str] | None = None  # for the sleep-mode knobs (EMU_SLEEP_S, …)
    ledger: gpuledger.Ledger | None = None  # the GPUs shared with other emulated engines
    sized: ModelFacts | None = None  # the served model's size (sizing/models.py)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        fault = env.get("EMU_FAULT") or None
        if fault and fault not in FAULTS:
            raise ValueError(f"EMU_FAULT={fault!r}: expected one of {', '.join(FAULTS)}")
        load_s = env_float(env, "EMU_LOAD_SECONDS", 2.0)
        if fault == "slow_ready":
            load_s *= env_float(env, "EMU_SLOW_FACTOR", 5.0)
        versions.flavour(env)  # an unknown EMU_VLLM_VERSION is a usage error
        return cls(
            fault=fault,
            inputs=MemoryInputs.from_env(env),
            pacing=Pacing.from_env(env),
            load_s=load_s,
            fault_after_s=env_float(env, "EMU_FAULT_AFTER_S", 5.0),
            max_workers=int(env_float(env, "EMU_MAX_WORKERS", 4)),
            offload_cap=int(
                env_float(env, "EMU_OFFLOAD_MAX_BYTES", shmfiles.DEFAULT_OFFLOAD_MAX_BYTES)
            ),
            shm_dir=shmfiles.shm_dir(env),
            env_api_key=env.get("VLLM_API_KEY") or None,
            timing=cluster.Timing.from_env(env, env_float),
            dev_mode=env.get("VLLM_SERVER_DEV_MODE") == "1",
            env=dict(env),
        )


def main(argv: list[str] | None = None, env: Mapping[str, str] | None = None) -> int:
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
    # the served model's own size when composegen knows it (sizing/models.py)
    settings.sized = settings.inputs.size_for(args.values, env)
    try:
        return _run(args.values, args.non_default, settings, launch)
    finally:
        if settings.ledger is not None:
            settings.ledger.release()


def _run(
    values: dict, non_default: dict, settings: Settings, launch: cluster.Launch | None = None
) -> int:
    files: list[shmfiles.ShmFile] = []
    pids: dict[str, int] = {}
    server = None
    head: cluster.Head | None = None
    member: cluster.Member | None = None
    clean = False
    # First thing: a SIGTERM right after the first log line must still end in a clean exit 0.
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    log = Log()
    try:
        model = values["model"]
        _banner(log, model, non_default)
        plan = plan_memory(values, settings.inputs)
        if settings.sized is not None:
            log("INFO", "emulator.py:3", size_note(settings.sized))
        names, workers = _engine_processes(values, settings, launch)
        offload_bytes = int(float(values.get("kv_offloading_size") or 0) * GiB)
        uniproc = workers == 1 and launch is None
        sizes = shmfiles.planned_sizes(workers, offload_bytes, settings.offload_cap, uniproc)
        # the GPU share first (vLLM's startup check), then the shared-memory files
        created = _shm_files(log, settings.shm_dir, sizes) if _claim(log, settings, plan) else None
        if created is None:
            return 1
        files = created
        sys.stdout.flush()  # forked children must not inherit (and later repeat) buffered output
        shmfiles.start_workers(names, files, pids)
        log.pids.update(pids)
        if launch and launch.headless:
            member = cluster.Member(launch, settings.timing, log)
            return headless.serve_headless(
                log, values, plan, settings.load_s, settings.fault, member
            )
        if launch:
            head = cluster.Head(launch, settings.timing, log)
            # after the fork: only this process turns it into PeerLost
            signal.signal(signal.SIGUSR1, _peer_lost)
            head.on_lost = lambda: os.kill(os.getpid(), signal.SIGUSR1)
            head.listen()
            head.gather()
        opened = _load_and_listen(log, values, plan, settings)
        if opened is None:
            return 1
        server, state = opened
        log("INFO:", "", f"Started server process [{os.getpid()}]")
        log("INFO:", "", "Waiting for application startup.")
        log("INFO:", "", "Application startup complete.")
        state.ready_at = time.monotonic()
        server.serve_forever(poll_interval=0.2)
        return 0
    except _Stop:
        clean = True
        if server is not None:
            _log_shutdown(log)
        return 0
    except cluster.ClusterError as exc:
        log("ERROR", "multiproc_executor.py:260", str(exc), loading.CORE if head else "APIServer")
        return 1
    except cluster.PeerLost:
        if head is not None:  # only a head turns a lost peer into PeerLost
            headless.log_worker_death(log, head)
        return 1
    finally:
        _wind_down(log, head, member, server, pids, files, clean=clean)


def _load_and_listen(
    log: Log, values: dict, plan: MemoryPlan, settings: Settings
) -> tuple[ThreadingHTTPServer, ServerState] | None:
    """Load the weights (staged like vLLM), then open the API port: the server and its state, or
    None when either failed (the log says why)."""
    if not loading.load(log, values, plan, settings.fault, settings.load_s):
        return None
    host = values.get("host") or "0.0.0.0"
    port = int(values.get("port") or 8000)
    state = _server_state(log, values, plan, settings)
    server = _listen(log, host, port, state)
    return None if server is None else (server, state)


def _wind_down(
    log: Log,
    head: cluster.Head | None,
    member: cluster.Member | None,
    server: ThreadingHTTPServer | None,
    pids: dict[str, int],
    files: list[shmfiles.ShmFile],
    *,
    clean: bool,
) -> None:
    """Ignore further signals, close the cluster links and the port, stop the workers, remove the
    shared-memory files."""
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
        removed_line = f"composegen emulator removed {len(removed)} shared-memory file(s)"
        log("INFO", "emulator.py:2", removed_line)


def _stop(signum: int, frame: FrameType | None) -> NoReturn:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise _Stop()


def _peer_lost(signum: int, frame: FrameType | None) -> NoReturn:
    raise cluster.PeerLost()


def _engine_processes(
    values: dict, settings: Settings, launch: cluster.Launch | None
) -> tuple[list[str], int]:
    """(process names to fork, number of workers): this node's TP×PP ranks, capped by
    EMU_MAX_WORKERS."""
    tp = int(values.get("tensor_parallel_size") or 1)
    ranks = (
        launch.local_ranks
        if launch
        else list(range(tp * int(values.get("pipeline_parallel_size") or 1)))
    )
    ranks = ranks[: max(1, settings.max_workers - 1)]
    # A headless node runs workers only; the engine core lives on the head.
    names = ([] if launch and launch.headless else ["EngineCore_DP0"]) + [
        f"Worker_TP{i}" for i in ranks
    ]
    return names, len(ranks)


def _listen(log: Log, host: str, port: int, state: ServerState) -> ThreadingHTTPServer | None:
    """Bind and listen only now (the port was closed while loading); log the routes as vLLM does."""
    try:
        server = make_server(host, port, state)
    except OSError as exc:
        error = f"OSError: [Errno {exc.errno}] {exc.strerror} ({host}:{port})"
        log("ERROR", "api_server.py:1960", error)
        return None
    shown = f"[{host}]" if ":" in host else host
    log("INFO", "launcher.py:47", f"Starting vLLM server on http://{shown}:{port}")
    log("INFO", "launcher.py:51", "Available routes are:")
    for route, methods in {**ROUTES, **(DEV_ROUTES if state.sleep else {})}.items():
        log("INFO", "launcher.py:59", f"Route: {route}, Methods: {methods}")
    return server


def _log_shutdown(log: Log) -> None:
    """vLLM's own shutdown trail, then uvicorn's (a real server prints no `Finished server
    process`)."""
    for source, message in SHUTDOWN:
        log("INFO", source, f"[shutdown] {message}")
    for message in ("Shutting down", "Waiting for application shutdown."):
        log("INFO:", "", message)
    log("INFO:", "", "Application shutdown complete.")


def _banner(log: Log, model: str, non_default: dict) -> None:
    """The first lines: what this is, the imitated release's banner, the non-default args."""
    log(
        "INFO",
        "emulator.py:1",
        "composegen vLLM emulator: a TEST DOUBLE / DEMO MODE, not vLLM. No model is "
        "loaded and no GPU is used; memory numbers come from a model, replies from rules.",
    )
    flavour = versions.active()
    log("INFO", "api_utils.py:345", "\n".join(versions.logo(flavour.reported, model)))
    if flavour.server_version_line:
        log("INFO", "api_server.py:1897", f"vLLM server version {VERSION}, serving model {model}")
    log("INFO", "utils.py:335", f"non-default args: {non_default!r}")
    if non_default.get("enable_sleep_mode"):
        log("INFO", "model.py:549", "Enabling cumem allocator because sleep mode requires it.")


def _claim(log: Log, settings: Settings, plan: MemoryPlan) -> bool:
    """vLLM's startup memory check against what the other emulated engines on our GPUs hold
    (gpuledger.py; without EMU_GPU_LEDGER the GPU is ours alone); the profiling line then shows
    the free memory that is left."""
    ledger = gpuledger.Ledger.from_env(settings.env or {}, settings.inputs.gpu_gib)
    if ledger is None:
        return True
    device, free, claimed = ledger.claim(plan.requested_gib)
    plan.free_gib = min(plan.free_gib, free)
    held = plan.total_gib - free
    gpus = f"GPUs {','.join(ledger.gpus)} of {plan.total_gib:.2f} GiB each"
    others = f"{held:.2f} GiB held by other engines on {device}"
    log("INFO", "emulator.py:3", f"EMULATED GPU ledger: {gpus}; {others}")
    if claimed:
        settings.ledger = ledger
        return True
    # vLLM's startup memory check (its worker's request_memory), figures rounded to 2 decimals
    text = (
        f"Free memory on device {device} ({round(free, 2)}/{round(plan.total_gib, 2)} GiB) on "
        f"startup is less than desired GPU memory utilization ({plan.utilization}, "
        f"{round(plan.requested_gib, 2)} GiB). Decrease GPU memory utilization or reduce GPU "
        "memory used by other processes."
    )
    loading.engine_failed(log, f"ValueError: {text}")
    return False


def _shm_files(
    log: Log, shm_dir: Path, sizes: list[tuple[str, int]]
) -> list[shmfiles.ShmFile] | None:
    """The engine's shared-memory files, or None (logged) when they do not fit or cannot be made."""
    problem = shmfiles.space_problem(shm_dir, sizes)
    if problem:
        log("ERROR", "shm_broadcast.py:262", problem)
        return None
    try:
        return shmfiles.create_files(shm_dir, sizes)
    except OSError as exc:
        log("ERROR", "shm_broadcast.py:262", f"Cannot create shared memory in {shm_dir}: {exc}")
        return None


def _server_state(log: Log, values: dict, plan: MemoryPlan, settings: Settings) -> ServerState:
    model = values["model"]
    keys = list(values.get("api_key") or []) + (
        [settings.env_api_key] if settings.env_api_key else []
    )
    info = ServingInfo(
        model=model,
        served_names=list(values.get("served_model_name") or [model]),
        adapters=[  # --lora-modules: name=path, or JSON with a name (vLLM's LoRAParserAction)
            json.loads(m)["name"] if m[:1] == "{" else m.partition("=")[0]
            for m in map(str, values.get("lora_modules") or [])
        ],
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
        metrics=Metrics(
            info.name,
            plan.kv_tokens,
            cache_labels,
            max_num_seqs=values.get("max_num_seqs"),
            max_model_len=plan.max_model_len,
            speculative_config=values.get("speculative_config"),
            tool_parser=bool(info.tool_parser),
        ),
        log=log,
        api_keys=keys,
        pacing=settings.pacing,
        fault_after_s=settings.fault_after_s,
        access_log=not values.get("disable_uvicorn_access_log"),
    )
    if values.get("enable_sleep_mode") and settings.dev_mode:
        state.sleep = SleepMode.from_env(
            settings.env or {}, plan.requested_gib, plan.weights_gib, settings.fault
        )
        state.sleep.ledger, state.sleep.metrics = settings.ledger, state.metrics
    return state
