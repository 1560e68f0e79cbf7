"""vLLM startup-log parsing across versions 0.10–0.33 (see shared/reference/facts-vllm-compose.md §1).

`parse_startup_log(text) -> StartupReport`; `StartupReport.to_json()` has exactly these keys
(a value the log does not state is null — never estimated):

    kv_cache_tokens int, max_concurrency float, max_model_len int,
    kv_cache_gib_per_rank [float] (one per rank that logged one; [] if none), kv_cache_gib_min float,
    weights_gib, peak_activation_gib, gpu_total_gib, gpu_free_gib, gpu_memory_utilization,
    cuda_graph_gib, engine_init_seconds (floats), kv_cache_includes_host bool,
    vllm_version str, ready bool, server_address str,
    errors [{"line", "kind", "hint"} (+ "estimated_max_model_len" int for kv_too_small_for_max_len)],
    effective_args dict (the engine's `non-default args`, read safely; reprs kept as text),
    lines_parsed int

Sources, first choice first: weights_gib / peak_activation_gib / gpu_* from the "Free memory on
device" line (from ~0.2x that line reports weights and non-torch memory together as "consumed
memory (weights + non-torch)", and weights_gib is then that sum), else `Model loading took` /
the DEBUG "torch peak memory increase"; max_model_len from the "Maximum concurrency for L tokens"
line, else "Using max model len", else effective_args, else the max-seq-len error. Scalars that
several ranks log are taken from the lowest rank. cuda_graph_gib is the captured size.

`mismatches(profile_flags, effective_args)` compares a profile's flags with what the engine got.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from pathlib import Path

from composegen.vllm.pyliteral import LiteralError, parse_literal, same_value

__all__ = ["StartupReport", "format_text", "mismatches", "parse_startup_log"]

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_OUTER = re.compile(r"^(?:\d{4}-\d\d-\d\dT[\d:.]+Z? )?(?:[\w.-]+\s+\| )?")  # docker --timestamps, compose
_PROC = re.compile(r"\((?P<proc>[A-Za-z_][\w-]*) pid=(?P<pid>\d+)\)\s?")
_LOGFMT = re.compile(r"(?P<lvl>DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[[^\]]+:\d+\] ?")
_UVICORN = re.compile(r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):\s+")
_NUM = r"(-?\d+(?:\.\d+)?)"

_VERSION = re.compile(r"vLLM (?:API )?server version (\S+?),?(?:\s|$)")
_LOGO_VERSION = re.compile(r"█\s+version (\S+)\s*$")
_NON_DEFAULT = re.compile(r"non-default args: (\{.*\})\s*$")
_WEIGHTS = re.compile(rf"Model loading took {_NUM} GiB(?: memory)? and")
_KV_GIB = re.compile(rf"Available KV cache memory: {_NUM} GiB|reserved {_NUM} GiB memory for KV Cache")
_KV_SIZE = re.compile(r"(?P<pool>[A-Z]+(?: \+ host)?) KV cache size: (?P<tok>[\d,]+) tokens")
_CONCURRENCY = re.compile(r"Maximum concurrency for (?P<len>[\d,]+) tokens per request: (?P<x>\d+(?:\.\d+)?)x")
_FREE = re.compile(rf"Free memory on device (?:\S+ )?\({_NUM}/{_NUM} GiB\) on startup")
_UTIL = re.compile(rf"(?:Desired GPU memory utilization is|desired GPU memory utilization) \({_NUM}, {_NUM} GiB\)")
_USAGE = re.compile(
    rf"Actual usage is {_NUM} GiB for (?:weight|consumed memory \(weights \+ non-torch\)), "
    rf"{_NUM} GiB for peak activation, (?:{_NUM} GiB for non-torch memory, )?and {_NUM} GiB for CUDAGraph memory"
)
_CURRENT_KV = re.compile(rf"Current kv cache memory in use is {_NUM} (GiB|bytes)")
_PROFILE_PEAK = re.compile(rf"torch peak memory increase: {_NUM} ?GiB")
_GRAPHS = re.compile(rf"Graph capturing finished in \d+ secs, took {_NUM} GiB")
_INIT = re.compile(r"init engine \(profile, create kv cache, warmup model\) took (\d+(?:\.\d+)?) (?:seconds|s)\b")
_MAX_LEN = re.compile(r"Using max model len (\d+)")
_STARTED = re.compile(r"Starting vLLM (?:API )?server (?:\d+ )?on (\S+)")
_COMPLETE = "Application startup complete."
_EXCEPTION = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt)(?::\s.*)?$")
_WRAPPER_EXCEPTIONS = ("Engine core initialization failed", "WorkerProc initialization failed")
_ESTIMATED_LEN = re.compile(r"estimated maximum model length is ([\d,]+)")

# (kind, pattern, hint). Order matters only for lines that match several patterns.
_FAILURES = [
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
_ENGINE_FAILED = re.compile(r"EngineCore failed to start|Engine core initialization failed")
_ENGINE_FAILED_HINT = (
    "The engine process died while starting and the log names no cause composegen knows: read the lines above this one."
)
_EXCEPTION_HINT = "Read the traceback that ends at this line in the container log; composegen has no rule for it."
WARNING_KINDS = {"shm_broadcast_block"}


@dataclasses.dataclass
class StartupReport:
    kv_cache_tokens: int | None = None
    max_concurrency: float | None = None
    max_model_len: int | None = None
    kv_cache_gib_per_rank: list[float] = dataclasses.field(default_factory=list)
    kv_cache_gib_min: float | None = None
    weights_gib: float | None = None
    peak_activation_gib: float | None = None
    gpu_total_gib: float | None = None
    gpu_free_gib: float | None = None
    gpu_memory_utilization: float | None = None
    cuda_graph_gib: float | None = None
    engine_init_seconds: float | None = None
    kv_cache_includes_host: bool = False
    vllm_version: str | None = None
    ready: bool = False
    server_address: str | None = None
    errors: list[dict] = dataclasses.field(default_factory=list)
    effective_args: dict | None = None
    lines_parsed: int = 0

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def _split(line: str) -> tuple[str | None, str]:
    """(rank key, message) of one ANSI-free line; the key is the process tag, e.g. `Worker_TP1`."""
    line = _OUTER.sub("", line, count=1)
    fmt = _LOGFMT.search(line)
    head = line[: fmt.start()] if fmt else line[:120]
    proc = _PROC.search(head)
    if fmt:
        return (proc.group("proc") if proc else None), line[fmt.end() :]
    msg = line[proc.end() :] if proc else line
    return (proc.group("proc") if proc else None), _UVICORN.sub("", msg.strip())


def _rank_order(proc: str | None) -> tuple:
    """Sort key putting rank 0 first: `Worker_TP1` -> (1,), `Worker_PP1_TP0` -> (1, 0); no tag last."""
    if proc is None or proc.startswith("#"):  # "#N": the Nth line without a process tag
        return (float("inf"), int(proc[1:]) if proc else 0)
    return tuple(int(n) for n in re.findall(r"(?:DP|PP|PCP|TP|DCP|EP)(\d+)", proc)) or (0,)


class _Collector:
    def __init__(self) -> None:
        self.report = StartupReport()
        self.ranked: dict[str, dict] = {}  # field -> {rank key: value}; a rank's first value wins
        self.firsts: dict[str, object] = {}
        self.error_keys: set[tuple[str, str]] = set()
        self.saw_traceback = False
        self.last_exception: tuple[str, str] | None = None  # (line, message)
        self.engine_failed: str | None = None
        self.unnamed = 0

    def ranked_value(self, field: str, proc: str | None, value: object) -> None:
        key = proc or f"#{self.unnamed}"
        self.ranked.setdefault(field, {}).setdefault(key, value)

    def lowest_rank(self, field: str) -> object:
        values = self.ranked.get(field)
        return values[min(values, key=_rank_order)] if values else None

    def first(self, field: str, value: object) -> None:
        self.firsts.setdefault(field, value)

    def smallest(self, field: str, value: float) -> None:
        """≤0.11 logs one KV size per worker before unifying them to the smallest: keep that one."""
        self.firsts[field] = min(value, self.firsts.get(field, value))

    def feed(self, line: str) -> None:
        proc, msg = _split(line)
        if proc is None:
            self.unnamed += 1
        self._facts(proc, msg)
        self._failures(line, msg)

    def _facts(self, proc: str | None, msg: str) -> None:
        r = self.report
        if m := (_VERSION.search(msg) or _LOGO_VERSION.search(msg)):
            r.vllm_version = r.vllm_version or m.group(1)
        if (m := _NON_DEFAULT.search(msg)) and r.effective_args is None:
            try:
                args = parse_literal(m.group(1))
            except LiteralError:
                args = None  # a truncated line: better no args than wrong ones
            r.effective_args = args if isinstance(args, dict) else None
        if m := _WEIGHTS.search(msg):
            self.ranked_value("model_loading", proc, float(m.group(1)))
        if m := _KV_GIB.search(msg):
            self.ranked_value("kv", proc, float(m.group(1) or m.group(2)))
        if m := _KV_SIZE.search(msg):
            self.smallest("tokens", int(m.group("tok").replace(",", "")))
            r.kv_cache_includes_host = r.kv_cache_includes_host or m.group("pool").endswith("+ host")
        if m := _CONCURRENCY.search(msg):
            self.smallest("concurrency", float(m.group("x")))
            self.first("max_len_line", int(m.group("len").replace(",", "")))
        if m := _FREE.search(msg):
            self.ranked_value("free", proc, (float(m.group(1)), float(m.group(2))))
        if m := _UTIL.search(msg):
            self.ranked_value("util", proc, float(m.group(1)))
        if m := _USAGE.search(msg):
            self.ranked_value("usage_weights", proc, float(m.group(1)))
            self.ranked_value("usage_peak", proc, float(m.group(2)))
            self.ranked_value("usage_graphs", proc, float(m.group(4)))
        if m := _CURRENT_KV.search(msg):
            gib = float(m.group(1)) if m.group(2) == "GiB" else round(float(m.group(1)) / (1 << 30), 2)
            self.ranked_value("kv_in_use", proc, gib)
        if m := _PROFILE_PEAK.search(msg):
            self.ranked_value("profile_peak", proc, float(m.group(1)))
        if m := _GRAPHS.search(msg):
            self.ranked_value("graphs", proc, float(m.group(1)))
        if m := _INIT.search(msg):
            self.first("init", float(m.group(1)))
        if m := _MAX_LEN.search(msg):
            self.first("using_max_len", int(m.group(1)))
        if m := _STARTED.search(msg):
            r.server_address = r.server_address or m.group(1)
            self.first("started", True)
        if msg.strip() == _COMPLETE or msg.endswith(" " + _COMPLETE):
            self.first("complete", True)

    def _failures(self, line: str, msg: str) -> None:
        if msg.startswith("Traceback (most recent call last)"):
            self.saw_traceback = True
        elif _ENGINE_FAILED.search(msg) and self.engine_failed is None:
            self.engine_failed = line.strip()  # a wrapper: reported only when nothing more specific is
        elif self.saw_traceback and _EXCEPTION.match(msg) and not any(w in msg for w in _WRAPPER_EXCEPTIONS):
            self.last_exception = (line.strip(), msg)
        for kind, pattern, hint in _FAILURES:
            m = pattern.search(msg)
            if not m or (kind, msg[m.start() :]) in self.error_keys:
                continue
            self.error_keys.add((kind, msg[m.start() :]))
            error = {"line": line.strip(), "kind": kind, "hint": hint}
            if kind == "kv_too_small_for_max_len":
                est = _ESTIMATED_LEN.search(msg)
                error["estimated_max_model_len"] = int(est.group(1).replace(",", "")) if est else None
                error["hint"] = hint.format(fits=f" (at most {error['estimated_max_model_len']})" if est else "")
                seq_len = re.search(r"max seq len \(([\d,]+)\)", msg).group(1)
                self.first("error_max_len", int(seq_len.replace(",", "")))
            self.report.errors.append(error)
            break

    def finish(self, lines: int) -> StartupReport:
        r, get = self.report, self.firsts.get
        r.lines_parsed = lines
        r.kv_cache_tokens = get("tokens")
        r.max_concurrency = get("concurrency")
        kv = dict(self.ranked.get("kv", {}))
        for proc, gib in self.ranked.get("kv_in_use", {}).items():
            kv.setdefault(proc, gib)  # 0.12+ logs "Available" for rank 0 only; the rest say "in use"
        r.kv_cache_gib_per_rank = [kv[k] for k in sorted(kv, key=_rank_order)]
        r.kv_cache_gib_min = min(r.kv_cache_gib_per_rank) if r.kv_cache_gib_per_rank else None
        r.weights_gib = _first_not_none(self.lowest_rank("usage_weights"), self.lowest_rank("model_loading"))
        r.peak_activation_gib = _first_not_none(self.lowest_rank("usage_peak"), self.lowest_rank("profile_peak"))
        r.cuda_graph_gib = _first_not_none(self.lowest_rank("graphs"), self.lowest_rank("usage_graphs"))
        free = self.lowest_rank("free")
        r.gpu_free_gib, r.gpu_total_gib = free if free else (None, None)
        r.gpu_memory_utilization = self.lowest_rank("util")
        r.engine_init_seconds = get("init")
        r.max_model_len = _first_not_none(
            get("max_len_line"),
            get("using_max_len"),
            _as_int((r.effective_args or {}).get("max_model_len")),
            get("error_max_len"),
        )
        r.ready = bool(get("complete") or get("started"))
        fatal = [e for e in r.errors if e["kind"] not in WARNING_KINDS]
        if self.last_exception and not fatal:
            r.errors.append({"line": self.last_exception[0], "kind": "exception", "hint": _EXCEPTION_HINT})
        elif self.engine_failed and not fatal:
            r.errors.append({"line": self.engine_failed, "kind": "engine_core_failed", "hint": _ENGINE_FAILED_HINT})
        return r


def _first_not_none(*values):
    return next((v for v in values if v is not None), None)


def _as_int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    return value if isinstance(value, int) and value > 0 else None  # -1 / "auto": the engine chose


def parse_startup_log(text: str) -> StartupReport:
    collector = _Collector()
    lines = 0
    for raw in text.splitlines():
        line = _ANSI.sub("", raw).replace("\r", "").rstrip()
        if not line.strip():
            continue
        lines += 1
        collector.feed(line)
    return collector.finish(lines)


def format_text(report: StartupReport | dict) -> str:
    data = report.to_json() if isinstance(report, StartupReport) else dict(report)
    rows = []
    for key, value in data.items():
        if key in ("errors", "effective_args", "mismatches"):
            continue
        if isinstance(value, list):
            value = ", ".join(f"{v:g}" for v in value) if value else "-"
        elif isinstance(value, bool):
            value = "yes" if value else "no"
        rows.append((key, "-" if value is None else str(value)))
    args = data.get("effective_args")
    rows.append(("effective_args", "-" if args is None else f"{len(args)} non-default args"))
    width = max(len(k) for k, _ in rows) + 1
    out = [f"{k + ':':<{width}} {v}" for k, v in rows]
    for name, value in (args or {}).items():
        out.append(f"  {name} = {json.dumps(value)}")
    errors = data.get("errors") or []
    out.append(f"{'errors:':<{width}} {len(errors) or 'none'}")
    for error in errors:
        extra = (
            f" (estimated max model len {error['estimated_max_model_len']})"
            if error.get("estimated_max_model_len") is not None
            else ""
        )
        out.append(f"  [{error['kind']}]{extra} {error['line']}")
        out.append(f"    hint: {error['hint']}")
    return "\n".join(out) + "\n"


# --- profile flags vs the engine's effective args ---------------------------------------------------

_CATALOG = Path(__file__).resolve().parent / "data" / "vllm-0.33.0-serve-flags.json"


@functools.lru_cache(maxsize=1)
def _flag_index() -> dict[str, tuple[str, object, bool]]:
    """option without dashes -> (dest, catalog default, option negates the dest)."""
    index = {}
    for flag in json.loads(_CATALOG.read_text(encoding="utf-8"))["flags"]:
        for position, option in enumerate(flag["options"]):
            if option.startswith("--"):
                negates = position > 0 and option.startswith(("--no-", "--disable-"))
                index[option[2:]] = (flag["dest"], flag["default"], negates)
    return index


def mismatches(profile_flags: dict[str, object], effective_args: dict) -> list[dict]:
    """Every profile flag whose value the engine did not get: [{"flag", "profile", "engine"}].

    A flag missing from `effective_args` ran with the catalog default ("engine" is that default), so it
    is a mismatch only if the profile asked for something else. Values are compared normalised:
    4096 == "4096", dicts == their JSON/repr text, a profile dict matches when every key it sets
    has the engine's value (the engine fills in the rest), an enum repr matches its name or value,
    and a scalar matches a one-element list (`served_model_name`). Redacted values ('***') are skipped.
    """
    if effective_args is None:
        raise ValueError("effective_args is None: the log had no readable `non-default args` line")
    index = _flag_index()
    found = []
    for flag, wanted in profile_flags.items():
        name = flag.lstrip("-").replace("_", "-")
        dest, default, negates = index.get(name, (name.replace("-", "_"), None, False))
        expected = (not wanted) if negates and isinstance(wanted, bool) else wanted
        if dest in effective_args:
            engine = effective_args[dest]
        elif dest == "model" and "model_tag" in effective_args:
            engine = effective_args["model_tag"]
        else:
            engine = default
        if engine == "***" or same_value(expected, engine):
            continue
        found.append({"flag": flag, "profile": wanted, "engine": engine})
    return found
