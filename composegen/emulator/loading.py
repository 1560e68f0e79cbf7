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
crash_during_load fails after half the shards; never_ready stays after the last shard for good."""

from __future__ import annotations

import hashlib
import json
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


# torch.compile's cache, from two starts of one real vLLM 0.26.0 on an H100 with the same cache directory
# (tests/data/real-0.26.0-h100-warmstart: fresh.log empty, kept.log kept): `torch.compile took` 9.94 s
# cold, 1.11 s warm; the graph `takes 7.36 s` to compile, `took 0.088 s` to load.
COLD_COMPILE_S, WARM_COMPILE_S = 9.94, 1.11
COLD_GRAPH_S, WARM_GRAPH_S = 7.36, 0.088
COMPILE_FROM, COMPILE_SHARE = 0.45, 0.20  # the share of the load a cold compile takes
# what vLLM's compile hash covers that the emulator reads from argv (another value: another directory)
COMPILE_KEYS = (
    "model",
    "revision",
    "max_num_batched_tokens",
    "max_num_seqs",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "compilation_config",
    "dtype",
    "kv_cache_dtype",
    "quantization",
    "speculative_config",
)


class CompileCache:
    """The emulated torch.compile cache under VLLM_CACHE_ROOT, laid out and keyed as vLLM lays out
    its own: `torch_compile_cache/<10 hex>/rank_0_0/backbone` and the AOT artifact under
    `torch_compile_cache/torch_aot_compile/<64 hex>/rank_0_0/model`."""

    def __init__(self, values: dict, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        root = env.get("VLLM_CACHE_ROOT") or os.path.join(
            env.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "vllm"
        )
        config = json.dumps({k: values.get(k) for k in COMPILE_KEYS}, sort_keys=True, default=str)
        digest = hashlib.sha256(config.encode()).hexdigest()
        base = os.path.join(root, "torch_compile_cache")
        self.directory = os.path.join(base, digest[:10], "rank_0_0", "backbone")
        self.aot = os.path.join(base, "torch_aot_compile", digest, "rank_0_0", "model")

    @property
    def warm(self) -> bool:
        graph = os.path.join(self.directory, "vllm_compile_cache.py")
        return all(os.path.isfile(p) and not os.path.islink(p) for p in (graph, self.aot))

    def save(self, batched: int) -> bool:
        """Write the artifacts (never through a link); False when the directory cannot take them."""
        files = {os.path.join(self.directory, "vllm_compile_cache.py"): f"# (1, {batched})\n"}
        files[self.aot] = "emulated AOT artifact\n"
        try:
            for path, text in files.items():
                os.makedirs(os.path.dirname(path), exist_ok=True)
                tmp = f"{path}.{os.getpid()}.tmp"
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
                with os.fdopen(fd, "w") as out:
                    out.write(text)
                os.replace(tmp, path)
        except OSError:
            return False
        return True


class _Start:
    """One emulated start: its clock (fractions of `load_s`, moved earlier by what a warm compile
    saved) and its log."""

    def __init__(self, log: Callable[..., None], values: dict, load_s: float) -> None:
        self.log, self.values, self.load_s = log, values, load_s
        self.started = time.monotonic()
        self.saved = 0.0  # the fraction of the load a warm compile did not need

    def at(self, fraction: float) -> float:
        """Sleep until this fraction of the load time; the seconds since the start."""
        delay = self.started + (fraction - self.saved) * self.load_s - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        return time.monotonic() - self.started

    def raw(self, text: str, proc: str = WORKER) -> None:
        self.log("", "", text, proc)  # a tqdm redraw: the process tag only, no logger format

    def since(self, begun: float) -> float:
        return time.monotonic() - begun


def load(
    log: Callable[..., None], values: dict, plan: MemoryPlan, fault: str | None, load_s: float
) -> bool:
    """Emit the start-up lines over `load_s` seconds; False when the engine fails to start."""
    start = _Start(log, values, load_s)
    eager = bool(values.get("enforce_eager"))
    try:
        shards = shard_count()
    except ValueError as exc:
        log("ERROR", "core.py:912", f"ValueError: {exc}", CORE)
        return False
    _begin(start, plan, eager)
    if not _weights(start, shards, fault):
        return False
    took = f"Model loading took {gib(plan.weights_gib)} GiB memory and {start.at(0.45):.6f} seconds"
    log("INFO", "gpu_model_runner.py:2779", took, WORKER)
    compiled = 0.0 if eager else _compile(start)
    start.at(0.67)
    if not _profile(log, plan):
        return False
    start.at(0.72)
    log("INFO", "kv_cache_utils.py:1287", kv_size_line(plan), CORE)
    if not eager:
        capture_from = time.monotonic()
        _capture(start, "mixed prefill-decode, PIECEWISE", _PIECEWISE, 0.72, 0.87)
        _capture(start, "decode, FULL", _FULL, 0.87, 0.96)
        secs = max(1, round(start.since(capture_from)))
        took = f"Graph capturing finished in {secs} secs, took {gib(plan.cudagraph_gib)} GiB"
        log("INFO", "gpu_model_runner.py:3617", took, WORKER)
    total = start.at(1.0)
    extra = f" (compilation: {compiled:.2f} s)" if compiled else ""
    took = f"init engine (profile, create kv cache, warmup model) took {total:.2f} s{extra}"
    log("INFO", "core.py:257", took, CORE)
    return True


def _begin(start: _Start, plan: MemoryPlan, eager: bool) -> None:
    values, model = start.values, start.values["model"]
    start.log(
        "INFO",
        "core.py:98",
        f"Initializing a V1 LLM engine (v{VERSION}) with config: model='{model}', "
        f"max_seq_len={plan.max_model_len}, tensor_parallel_size="
        f"{values.get('tensor_parallel_size')}, kv_cache_dtype={values.get('kv_cache_dtype')}, "
        f"gpu_memory_utilization={plan.utilization}, enforce_eager={eager}",
        CORE,
    )
    start.at(0.02)
    start.log("INFO", "gpu_model_runner.py:2738", f"Starting to load model {model}...", WORKER)
    start.at(0.05)
    start.log("INFO", "weight_utils.py:419", "Using model weights format ['*.safetensors']", WORKER)
    spent = start.at(0.15) - 0.05 * start.load_s
    if spent > 0.5:  # vLLM only reports a download that took longer
        spent_line = f"Time spent downloading weights for {model}: {spent:.6f} seconds"
        start.log("INFO", "weight_utils.py:435", spent_line, WORKER)


def _weights(start: _Start, shards: int, fault: str | None) -> bool:
    """The shards' bar; False when the emulated fault crashes the load half way."""
    desc = "Loading safetensors checkpoint shards"
    shards_from = time.monotonic()
    start.raw(tqdm_line(desc, 0, shards, 0.0, bar=False))
    for k in range(1, shards + 1):
        start.at(0.15 + 0.30 * k / shards)
        start.raw(tqdm_line(desc, k, shards, start.since(shards_from), bar=False))
        if fault == "crash_during_load" and k == max(1, shards // 2):
            _crash(start.log)
            return False
    start.raw("")  # tqdm's close: an empty line
    took = f"Loading weights took {start.since(shards_from):.2f} seconds"
    start.log("INFO", "default_loader.py:299", took, WORKER)
    while fault == "never_ready":  # stuck after the weights; only a signal ends this
        time.sleep(5)
        bar = tqdm_line(desc, shards, shards, start.since(shards_from), bar=False)
        start.raw(f"{bar} (still initializing)")
    return True


def _compile(start: _Start) -> float:
    """torch.compile: cold, it compiles and saves the artifacts; warm (they are there), it loads them
    and its stage is as much shorter as the recording's."""
    log, cache = start.log, CompileCache(start.values)
    warm = cache.warm
    share = COMPILE_SHARE * (WARM_COMPILE_S / COLD_COMPILE_S if warm else 1.0)
    begun = start.at(COMPILE_FROM + 0.02)
    using = f"Using cache directory: {cache.directory} for vLLM's torch.compile"
    log("INFO", "backends.py:1094", using, WORKER)
    dynamo = start.at(COMPILE_FROM + 0.3 * share) - begun
    log("INFO", "backends.py:1155", f"Dynamo bytecode transform time: {dynamo:.2f} s", WORKER)
    batched = int(start.values.get("max_num_batched_tokens") or 8192)
    graph = (
        share
        * start.load_s
        * (WARM_GRAPH_S / WARM_COMPILE_S if warm else COLD_GRAPH_S / COLD_COMPILE_S)
    )
    start.at(COMPILE_FROM + 0.3 * share + graph / start.load_s)
    _graph_lines(log, cache, warm, batched, graph)
    took = start.at(COMPILE_FROM + share) - begun
    start.saved = COMPILE_SHARE - share  # what follows starts as much earlier
    log("INFO", "monitor.py:53", f"torch.compile took {took:.2f} s in total", WORKER)
    return took


def _graph_lines(
    log: Callable[..., None], cache: CompileCache, warm: bool, batched: int, graph: float
) -> None:
    """The graph and AOT lines: loaded from the cache (warm), or compiled and saved (cold)."""
    compile_range = f"compile range (1, {batched})"
    if warm:
        loaded = f"Directly load the compiled graph(s) for {compile_range} from the cache"
        log("INFO", "backends.py:258", f"{loaded}, took {graph:.3f} s", WORKER)
        aot = f"Directly load AOT compilation from path {cache.aot}"
        log("INFO", "decorators.py:311", aot, WORKER)
    else:
        compiling = f"Compiling a graph for {compile_range} takes {graph:.2f} s"
        log("INFO", "backends.py:393", compiling, WORKER)
        if cache.save(batched):
            log("INFO", "decorators.py:708", f"saved AOT compiled function to {cache.aot}", WORKER)


def _profile(log: Callable[..., None], plan: MemoryPlan) -> bool:
    if plan.kv_from_flag:
        reserved = f"Initial free memory {gib(plan.free_gib)} GiB, reserved {gib(plan.kv_gib)} GiB"
        skipped = "as specified by kv_cache_memory_bytes config and skipped memory profiling."
        log("INFO", "gpu_worker.py:312", f"{reserved} memory for KV Cache {skipped}", WORKER)
    else:
        log("INFO", "gpu_worker.py:340", free_memory_line(plan), WORKER)
        available = f"Available KV cache memory: {gib(plan.kv_gib)} GiB"
        log("INFO", "gpu_worker.py:346", available, WORKER)
    if plan.error:
        engine_failed(log, f"ValueError: {plan.error}")
    return not plan.error


def _capture(start: _Start, what: str, total: int, begin: float, end: float) -> None:
    """One capture pass: as many redraws as tqdm's minimum interval allows, the last one at 100%."""
    desc = f"Capturing CUDA graphs ({what})"
    begun = time.monotonic()
    redraws = max(1, min(total, int((end - begin) * start.load_s / TQDM_MIN_INTERVAL_S)))
    start.raw(tqdm_line(desc, 0, total, 0.0, bar=True))
    for i in range(1, redraws + 1):
        start.at(begin + (end - begin) * i / redraws)
        start.raw(tqdm_line(desc, total * i // redraws, total, start.since(begun), bar=True))


def _crash(log: Callable[..., None]) -> None:
    engine_failed(
        log,
        "torch.AcceleratorError: CUDA error: an illegal memory access was encountered (emulated fault)",
        "CUDA kernel errors might be asynchronously reported at some other API "
        "call, so the stacktrace below might be incorrect.",
    )


def engine_failed(log: Callable[..., None], *errors: str) -> None:
    """vLLM's trail of an engine core that failed to start: its errors, then the API server's."""
    log("ERROR", "core.py:912", "EngineCore failed to start.", CORE)
    for error in errors:
        log("ERROR", "core.py:912", error, CORE)
    failed = "RuntimeError: Engine core initialization failed. See root cause above."
    log("ERROR", "api_server.py:1960", f"{failed} Failed core proc(s): {{'EngineCore_DP0': 1}}")
