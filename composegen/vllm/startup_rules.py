"""The one table of vLLM's log phrases (0.10–0.33): the startup parser (startup.py) and the stage
detection (stages.py) both read their patterns here, and no other module spells a vLLM log phrase
(tests/vllm/test_log_phrases.py checks it; the emulator, which writes such lines, is the exception).

Formats per version: shared/reference/facts-vllm-compose.md §1; the 0.26.0 lines were checked
against real servers' logs (tests/data/real-0.26.0-h200*/serve-*.log). `INTERESTING` is a cheap
pre-filter: a line that does not match it cannot match any parser pattern here, so a 200 MB log is
mostly skipped unread."""

from __future__ import annotations

import re

ANSI = re.compile(r"\x1b\[[0-9;]*m")
# docker --timestamps, compose
OUTER = re.compile(r"^(?:\d{4}-\d\d-\d\dT[\d:.]+Z? )?(?:[\w.-]+\s+\| )?")
PROC = re.compile(r"\((?P<proc>[A-Za-z_][\w-]*) pid=(?P<pid>\d+)\)\s?")
LOGFMT = re.compile(
    r"(?P<lvl>DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[[^\]]+:\d+\] ?"
)
UVICORN = re.compile(r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):\s+")
NUM = r"(-?\d+(?:\.\d+)?)"

VERSION = re.compile(r"vLLM (?:API )?server version (\S+?),?(?:\s|$)")
LOGO_VERSION = re.compile(r"█\s+version (\S+)\s*$")
NON_DEFAULT = re.compile(r"non-default args: (\{.*\})\s*$")
NON_DEFAULT_START = "non-default args: "
WEIGHTS_TOOK = "Model loading took"
WEIGHTS = re.compile(rf"{WEIGHTS_TOOK} {NUM} GiB(?: memory)? and")
KV_GIB = re.compile(rf"Available KV cache memory: {NUM} GiB|reserved {NUM} GiB memory for KV Cache")
KV_SIZE = re.compile(r"(?P<pool>[A-Z]+(?: \+ host)?) KV cache size: (?P<tok>[\d,]+) tokens")
CONCURRENCY = re.compile(
    r"Maximum concurrency for (?P<len>[\d,]+) tokens per request: (?P<x>\d+(?:\.\d+)?)x"
)
FREE = re.compile(rf"Free memory on device (?:\S+ )?\({NUM}/{NUM} GiB\) on startup")
UTIL = re.compile(
    rf"(?:Desired GPU memory utilization is|desired GPU memory utilization) \({NUM}, {NUM} GiB\)"
)
USAGE = re.compile(
    rf"Actual usage is {NUM} GiB for (?:weight|consumed memory \(weights \+ non-torch\)), "
    rf"{NUM} GiB for peak activation, (?:{NUM} GiB for non-torch memory, )?and {NUM} GiB for CUDAGraph memory"
)
CURRENT_KV = re.compile(rf"Current kv cache memory in use is {NUM} (GiB|bytes)")
PROFILE_PEAK = re.compile(rf"torch peak memory increase: {NUM} ?GiB")
GRAPHS_DONE = "Graph capturing finished in"
GRAPHS = re.compile(rf"{GRAPHS_DONE} (?P<secs>\d+) secs, took (?P<gib>{NUM}) GiB")
INIT_TOOK = r"init engine \(profile, create kv cache, warmup model\) took"
INIT = re.compile(
    INIT_TOOK + r" (\d+(?:\.\d+)?) (?:seconds|s)\b"
    r"(?: \(compilation: (\d+(?:\.\d+)?) s)?"
)
COMPILE_TOTAL = re.compile(r"torch\.compile (?:took|takes) (\d+(?:\.\d+)?) s in total")
MAX_LEN = re.compile(r"Using max model len (\d+)")
# torch.compile's cache under VLLM_CACHE_ROOT (a real 0.26.0 cold and warm: tests/data/real-0.26.0-h100-warmstart):
# (what, pattern); `what` is reused (loaded from the cache) or compiled (and saved to it).
CACHE_DIRECTORY = re.compile(r"Using cache directory: (\S+) for vLLM's torch\.compile")
CACHE_LINES: list[tuple[str, re.Pattern[str]]] = [
    ("compiled", re.compile(rf"Compiling a graph for (?P<what>.+?) takes (?P<s>{NUM[1:-1]}) s")),
    (
        "reused",
        re.compile(
            rf"Directly load the compiled graph\(s\) for (?P<what>.+?) from the cache, took (?P<s>{NUM[1:-1]}) s"
        ),
    ),
    ("compiled", re.compile(r"saved (?P<what>AOT) compiled function to \S")),
    ("reused", re.compile(r"Directly load (?P<what>AOT) compilation from path \S")),
]
STARTED = re.compile(r"Starting vLLM (?:API )?server (?:\d+ )?on (\S+)")
COMPLETE = "Application startup complete."
# Lines of a serving server (access log, periodic stats): most of a long-running log, never a
# startup fact.
ACCESS_LINE = 'HTTP/1.1" '
STATS_LINE = "Avg prompt throughput"
# the process tag of the API server: on a multi-node stack, the head's lines
API_PROCESS = "(APIServer pid="
EXCEPTION = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt)(?::\s.*)?$")
WRAPPER_EXCEPTIONS = ("Engine core initialization failed", "WorkerProc initialization failed")
SEQ_LEN = re.compile(r"max seq len \(([\d,]+)\)")
ESTIMATED_LEN = re.compile(r"estimated maximum model length is ([\d,]+)")

# (kind, pattern, hint). Order matters only for lines that match several patterns.
FAILURES = [
    (
        "kv_too_small_for_max_len",
        re.compile(r"max seq len \([\d,]+\).*larger than the available KV cache memory"),
        "Lower --max-model-len to what fits{fits} or give the KV cache more memory "
        "(higher --gpu-memory-utilization, lower --max-num-batched-tokens, an fp8 --kv-cache-dtype).",
    ),
    (
        "no_cache_memory",
        re.compile(r"No available memory for the cache blocks|Available KV cache memory: -"),
        "Weights and activations already use the whole memory budget: raise --gpu-memory-utilization, "
        "lower --max-num-batched-tokens or --max-num-seqs, or use more tensor-parallel GPUs.",
    ),
    (
        "gpu_memory_busy",
        re.compile(r"Free memory on device .*on startup is less than"),
        "Another process holds GPU memory: stop it, or lower --gpu-memory-utilization below the free share.",
    ),
    (
        "shm_insufficient",
        re.compile(r"Insufficient space in /dev/shm|failed to extend /dev/shm"),
        "Give the container a larger /dev/shm (shm_size: 16g or more, or ipc: host) and remove leftover "
        "segments from earlier runs.",
    ),
    (
        "shm_broadcast_block",
        re.compile(r"No available shared memory broadcast block found"),
        "A worker was busy or hung for a minute; harmless during compile or weight loading, but if the engine "
        "never becomes ready, check the workers' log lines and /dev/shm.",
    ),
    (
        "engine_ready_timeout",
        re.compile(r"Timed out waiting for engine core processes to start"),
        "Loading took longer than VLLM_ENGINE_READY_TIMEOUT_S: raise it in the environment (e.g. 1800) "
        "or make weights load faster (local cache, faster load format).",
    ),
    (
        "missing_module",
        re.compile(r"ModuleNotFoundError: No module named '?[\w.]+"),
        "The image lacks a Python module this vLLM build needs (named in the line): use an image built for "
        "this vLLM version and GPU, or one that installs the module.",
    ),
    (
        "cuda_oom",
        re.compile(r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory"),
        "The GPU ran out of memory: lower --gpu-memory-utilization, --max-num-batched-tokens or "
        "--max-num-seqs, or check for other processes on the GPU.",
    ),
    (
        "cuda_error",
        re.compile(r"CUDA error: (?!out of memory)"),
        "A CUDA kernel failed: check that the image's CUDA build matches the driver and GPU; rerun with "
        "CUDA_LAUNCH_BLOCKING=1 to find the failing kernel.",
    ),
]
ENGINE_FAILED = re.compile(r"EngineCore failed to start|Engine core initialization failed")
ENGINE_FAILED_HINT = (
    "The engine process died while starting and the log names no cause composegen knows:"
    " read the lines above this one."
)
ENGINE_DEAD = re.compile(
    r"EngineDeadError|Engine core proc \S+ died unexpectedly|EngineCore encountered a fatal error"
)
ENGINE_DEAD_HINT = (
    "The engine process died while serving: the server cannot answer any more requests. Read the lines "
    "above this one for the cause and restart the stack."
)
RUNTIME_HINT = (
    "Raised while serving a request after the server was ready; the server kept serving. Read the traceback "
    "that ends here (often a tool or reasoning parser failing on the model's output)."
)
# Kinds that stop the engine even after it was ready (they go to `errors`, not `runtime_errors`).
FATAL_AFTER_READY = {"cuda_oom", "cuda_error", "engine_dead"}
EXCEPTION_HINT = (
    "Read the traceback that ends at this line in the container log; composegen has no rule for it."
)
WARNING_KINDS = {"shm_broadcast_block"}
# effective_args keys whose values are secrets: shown as "***" (mismatches() skips "***").
SECRET_ARGS = {"api_key", "hf_token", "ssl_keyfile_password"}
# One search instead of one per rule: a line matching none of the rules is done with in one step.
FAILURE_ANY = re.compile("|".join(f"(?:{pattern.pattern})" for _, pattern, _ in FAILURES))
# Every literal the patterns above need; a line without one of these is skipped without further
# matching.
INTERESTING = re.compile(
    r"version|non-default args|took|KV [Cc]ache|kv cache|Maximum concurrency|Free memory|memory utilization|"
    r"Actual usage|peak memory|Using max model len|Starting vLLM|startup complete|Traceback|Error|Exception|"
    r"Exit|Interrupt|EngineCore|Engine core|max seq len|No available|Insufficient space|/dev/shm|Timed out|"
    r"CUDA|torch\.compile|died unexpectedly|AOT comp|takes"
)

# ---- stage detection (stages.py): which line starts which stage of a start ----
# vLLM's logger prefix (after Docker's timestamp, compose's service column and the process tags), or
# uvicorn's
LOGGER_PREFIX = re.compile(
    r"^(?:\d{4}-\d\d-\d\dT[\d:.]+Z? )?(?:[\w.-]+\s+\| )?"
    r"(?:\([\w-]+ pid=\d+\)\s*)*"
    r"(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[[^\]]+\] ?"
    r"|(?:INFO|WARNING|ERROR):\s+)?"
)
# tqdm: vLLM's weight bar `P% Completed | k/N [elapsed<remaining, rate]`, default bars `P%|███| k/N
# [..]`.
TQDM = re.compile(
    r"(?P<pct>\d+)%(?: Completed \||\|[^|]*\|)\s*(?P<k>\d+)/(?P<n>\d+)"
    r"(?: \[(?P<elapsed>[\d:]+)<(?P<left>[\d:?]+),\s*(?P<rate>[\d.?]+\s*(?:it/s|s/it)|\?it/s)?)?"
)
SHARD_BAR = re.compile(
    r"^Loading (?:safetensors|pt|npcache|gguf|\w+)(?: checkpoint shards| using \w+ loader)\b"
)
CAPTURE_BAR = re.compile(r"^Capturing CUDA graphs?(?: shapes)?(?P<what> \([^)]*\))?")
FETCH_BAR = re.compile(r"^Fetching \d+ files?\b")
NODES_WAIT = re.compile(
    r"waiting for (?P<n>\d+) remote node|Waiting for remote nodes to join \((?P<k>\d+)/(?P<t>\d+)"
)
START_FAILED = re.compile(
    ENGINE_FAILED.pattern
    + r"|EngineCore encountered a fatal error|died unexpectedly|Timed out waiting for engine core"
)
# (stage, pattern searched in the cleaned message); the first match wins. Warm-up runs silently
# between the end of graph capture and `init engine … took` (~9 s on an H200, cold compile cache).
STAGE_MARKERS: list[tuple[str, re.Pattern[str]]] = [
    ("ready", re.compile("^" + re.escape(COMPLETE))),
    (
        "api",
        re.compile(
            INIT_TOOK
            + r"|^Starting vLLM (?:API )?server|^Available routes are|^Started server process"
            r"|^Waiting for application startup"
        ),
    ),
    ("warmup", re.compile(GRAPHS_DONE)),
    ("graphs", re.compile(r"^Capturing CUDA graph")),
    (
        "compile",
        re.compile(
            r"for vLLM's torch\.compile|Dynamo bytecode transform time|Compiling a graph for|Start compiling function"
            r"|Directly load the compiled graph|torch\.compile is turned on"
        ),
    ),
    (
        "kv_cache",
        re.compile(
            WEIGHTS_TOOK
            + r"|Available KV cache memory|KV cache size: [\d,]+ tokens|Initial profiling/warmup run"
            r"|Memory profiling takes|memory for KV Cache as specified|Maximum concurrency for|"
            + COMPILE_TOTAL.pattern
        ),
    ),
    ("weights", re.compile(r"^Loading weights with|Time spent downloading weights")),
    ("download", re.compile(r"^Using model weights format|" + FETCH_BAR.pattern)),
    ("nodes", NODES_WAIT),
]
