"""The emulated engine start, staged like a real vLLM one and spread over EMU_LOAD_SECONDS.

Stages and their share of the load time (lines in vLLM's own formats, see shared/real-vllm/ and
shared/reference/facts-vllm-compose.md §1):
  0.00–0.10  engine init, `Starting to load model`, `Using model weights format`
  0.10–0.15  downloading weights (`Time spent downloading weights for M: S seconds`, only when > 0.5 s)
  0.15–0.45  N weight shards, vLLM's tqdm format `Loading safetensors checkpoint shards:  P% Completed | k/N
             [MM:SS<MM:SS, X.XXs/it]`, one line per shard; `Loading weights took`, `Model loading
             took`
  0.45–0.65  torch.compile (Dynamo, Inductor, `torch.compile took X s in total`), unless --enforce-eager
  0.65–0.72  profiling / KV cache (free memory, `Available KV cache memory`, KV cache size)
  0.72–0.97  CUDA graph capture: tqdm bars `Capturing CUDA graphs (mixed prefill-decode, PIECEWISE)` then
             `(decode, FULL)`, `Graph capturing finished in S secs, took G GiB`, unless
             --enforce-eager
  1.00       `init engine (profile, create kv cache, warmup model) took S s (compilation: C s)`

Environment: EMU_WEIGHT_SHARDS (4) how many checkpoint shards the bar counts. Faults:
crash_during_load fails after half the shards; never_ready stays after the last shard for good.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping

from composegen.emulator.memory import MemoryPlan, free_memory_line, gib, kv_size_line
from composegen.emulator.server import VERSION

DEFAULT_SHARDS = 4
TQDM_MIN_INTERVAL_S = 0.1  # tqdm's mininterval: a bar never redraws faster
_PIECEWISE, _FULL = 67, 35  # graphs vLLM captures with the default capture sizes
WORKER = "Worker_TP0"
CORE = "EngineCore_DP0"


def shard_count(env: Mapping[str, str] | None = None) -> int:
    raw = (os.environ if env is None else env).get("EMU_WEIGHT_SHARDS") or str(DEFAULT_SHARDS)
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(
            f"EMU_WEIGHT_SHARDS={raw!r}: expected a whole number of shards, at least 1"
        )
    return int(raw)


def _clock(seconds: float) -> str:
    """tqdm's `format_interval`: MM:SS, or H:MM:SS from an hour."""
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h:d}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def _rate(done: int, elapsed: float) -> str:
    """tqdm's rate field: `X.XXit/s`, or `X.XXs/it` when slower than one per second; `?it/s` before
    any."""
    if done == 0 or elapsed <= 0:
        return "?it/s"
    per_s = done / elapsed
    return f"{per_s:5.2f}it/s" if per_s >= 1 else f"{1 / per_s:5.2f}s/it"


def tqdm_line(desc: str, done: int, total: int, elapsed: float, bar: bool) -> str:
    """One redraw of a tqdm bar: vLLM's weight format (`P% Completed | k/N`) or tqdm's default
    (`P%|███| k/N`)."""
    pct = 100 * done // total
    left = "?" if done == 0 else _clock(elapsed / done * (total - done))
    stats = f"{done}/{total} [{_clock(elapsed)}<{left}, {_rate(done, elapsed)}]"
    if not bar:
        return f"{desc}: {pct:3d}% Completed | {stats}"
    filled = 10 * done // total
    return f"{desc}: {pct:3d}%|{'█' * filled}{' ' * (10 - filled)}| {stats}"


def load(
    log: Callable[..., None], values: dict, plan: MemoryPlan, fault: str | None, load_s: float
) -> bool:
    """Emit the start-up lines over `load_s` seconds; False when the engine fails to start."""
    started = time.monotonic()
    model = values["model"]
    eager = bool(values.get("enforce_eager"))

    def at(fraction: float) -> float:
        """Sleep until this fraction of the load time; the seconds since the start."""
        delay = started + fraction * load_s - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        return time.monotonic() - started

    def raw(text: str, proc: str = WORKER) -> None:
        log("", "", text, proc)  # a tqdm redraw: the process tag only, no logger format

    try:
        shards = shard_count()
    except ValueError as exc:
        log("ERROR", "core.py:912", f"ValueError: {exc}", CORE)
        return False
    log(
        "INFO",
        "core.py:98",
        f"Initializing a V1 LLM engine (v{VERSION}) with config: model='{model}', "
        f"max_seq_len={plan.max_model_len}, tensor_parallel_size="
        f"{values.get('tensor_parallel_size')}, kv_cache_dtype={values.get('kv_cache_dtype')}, "
        f"gpu_memory_utilization={plan.utilization}, enforce_eager={eager}",
        CORE,
    )
    at(0.02)
    log("INFO", "gpu_model_runner.py:2738", f"Starting to load model {model}...", WORKER)
    at(0.05)
    log("INFO", "weight_utils.py:419", "Using model weights format ['*.safetensors']", WORKER)
    spent = at(0.15) - 0.05 * load_s
    if spent > 0.5:  # vLLM only reports a download that took longer
        log(
            "INFO",
            "weight_utils.py:435",
            f"Time spent downloading weights for {model}: {spent:.6f} seconds",
            WORKER,
        )
    desc = "Loading safetensors checkpoint shards"
    shards_from = time.monotonic()
    raw(tqdm_line(desc, 0, shards, 0.0, bar=False))
    for k in range(1, shards + 1):
        at(0.15 + 0.30 * k / shards)
        raw(tqdm_line(desc, k, shards, time.monotonic() - shards_from, bar=False))
        if fault == "crash_during_load" and k == max(1, shards // 2):
            _crash(log)
            return False
    raw("")  # tqdm's close: an empty line
    log(
        "INFO",
        "default_loader.py:299",
        f"Loading weights took {time.monotonic() - shards_from:.2f} seconds",
        WORKER,
    )
    while fault == "never_ready":  # stuck after the weights; only a signal ends this
        time.sleep(5)
        raw(
            tqdm_line(desc, shards, shards, time.monotonic() - shards_from, bar=False)
            + " (still initializing)"
        )
    log(
        "INFO",
        "gpu_model_runner.py:2779",
        f"Model loading took {gib(plan.weights_gib)} GiB memory and {time.monotonic() - started:.6f} seconds",
        WORKER,
    )
    compiled = 0.0 if eager else _compile(log, at, values, load_s)
    at(0.67)
    if not _profile(log, plan):
        return False
    at(0.72)
    log("INFO", "kv_cache_utils.py:1287", kv_size_line(plan), CORE)
    if not eager:
        capture_from = time.monotonic()
        _capture(raw, at, "mixed prefill-decode, PIECEWISE", _PIECEWISE, 0.72, 0.87, load_s)
        _capture(raw, at, "decode, FULL", _FULL, 0.87, 0.96, load_s)
        secs = max(1, round(time.monotonic() - capture_from))
        log(
            "INFO",
            "gpu_model_runner.py:3617",
            f"Graph capturing finished in {secs} secs, took {gib(plan.cudagraph_gib)} GiB",
            WORKER,
        )
    total = at(1.0)
    extra = f" (compilation: {compiled:.2f} s)" if compiled else ""
    log(
        "INFO",
        "core.py:257",
        f"init engine (profile, create kv cache, warmup model) took {total:.2f} s{extra}",
        CORE,
    )
    return True


def _compile(
    log: Callable[..., None], at: Callable[[float], float], values: dict, load_s: float
) -> float:
    begun = at(0.47)
    log(
        "INFO",
        "backends.py:548",
        "Using cache directory: /root/.cache/vllm/torch_compile_cache/5e1a7c0d/rank_0_0/backbone "
        "for vLLM's torch.compile",
        WORKER,
    )
    log(
        "INFO",
        "backends.py:559",
        f"Dynamo bytecode transform time: {at(0.53) - begun:.2f} s",
        WORKER,
    )
    batched = int(values.get("max_num_batched_tokens") or 8192)
    graph_from = time.monotonic()
    at(0.63)
    log(
        "INFO",
        "backends.py:215",
        f"Compiling a graph for compile range (1, {batched}) takes {time.monotonic() - graph_from:.2f} s",
        WORKER,
    )
    took = at(0.65) - begun
    log("INFO", "monitor.py:34", f"torch.compile took {took:.2f} s in total", WORKER)
    return took


def _profile(log: Callable[..., None], plan: MemoryPlan) -> bool:
    if plan.kv_from_flag:
        log(
            "INFO",
            "gpu_worker.py:312",
            f"Initial free memory {gib(plan.free_gib)} GiB, reserved {gib(plan.kv_gib)} GiB memory for KV Cache "
            "as specified by kv_cache_memory_bytes config and skipped memory profiling.",
            WORKER,
        )
    else:
        log("INFO", "gpu_worker.py:340", free_memory_line(plan), WORKER)
        log(
            "INFO",
            "gpu_worker.py:346",
            f"Available KV cache memory: {gib(plan.kv_gib)} GiB",
            WORKER,
        )
    if not plan.error:
        return True
    log("ERROR", "core.py:912", "EngineCore failed to start.", CORE)
    log("ERROR", "core.py:912", f"ValueError: {plan.error}", CORE)
    log(
        "ERROR",
        "api_server.py:1960",
        "RuntimeError: Engine core initialization failed. See root cause above. "
        "Failed core proc(s): {'EngineCore_DP0': 1}",
    )
    return False


def _capture(
    raw: Callable[[str], None],
    at: Callable[[float], float],
    what: str,
    total: int,
    start: float,
    end: float,
    load_s: float,
) -> None:
    """One capture pass: as many redraws as tqdm's minimum interval allows, the last one at 100%."""
    desc = f"Capturing CUDA graphs ({what})"
    begun = time.monotonic()
    redraws = max(1, min(total, int((end - start) * load_s / TQDM_MIN_INTERVAL_S)))
    raw(tqdm_line(desc, 0, total, 0.0, bar=True))
    for i in range(1, redraws + 1):
        at(start + (end - start) * i / redraws)
        raw(tqdm_line(desc, total * i // redraws, total, time.monotonic() - begun, bar=True))


def _crash(log: Callable[..., None]) -> None:
    log("ERROR", "core.py:912", "EngineCore failed to start.", CORE)
    log(
        "ERROR",
        "core.py:912",
        "torch.AcceleratorError: CUDA error: an illegal memory access was encountered (emulated fault)",
        CORE,
    )
    log(
        "ERROR",
        "core.py:912",
        "CUDA kernel errors might be asynchronously reported at some other API "
        "call, so the stacktrace below might be incorrect.",
        CORE,
    )
    log(
        "ERROR",
        "api_server.py:1960",
        "RuntimeError: Engine core initialization failed. See root cause "
        "above. Failed core proc(s): {'EngineCore_DP0': 1}",
    )
