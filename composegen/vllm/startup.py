"""vLLM startup-log parsing across versions 0.10–0.33 (shared/reference/facts-vllm-compose.md §1,
and a real 0.26.0 server's logs in tests/data/logs/real-0.26.0-*.log).

`parse_startup_log(text)` / `parse_startup_stream(binary file)` -> `StartupReport`; the JSON Schema
is `composegen schema --report startup`. A value the log does not state is null, never estimated.
The stream is read bounded (logstream.py): constant memory for any input, a warning when a limit cut
it.

`errors` are failures before the server was ready, or ones that stop the engine later (CUDA errors,
OOM, a dead engine core); `runtime_errors` are exceptions logged while serving after `Application
startup complete.` (e.g. a tool parser failing on the model's output) — the server kept serving.

Sources, first choice first: weights_gib / peak_activation_gib / non_torch_gib / gpu_* from the
"Free memory on device" line (from ~0.2x that line reports weights and non-torch memory together as
"consumed memory (weights + non-torch)": weights_gib is then that sum and non_torch_gib null), else
`Model loading took` / the DEBUG "torch peak memory increase"; max_model_len from the "Maximum
concurrency for L tokens" line, else "Using max model len", else effective_args, else the
max-seq-len error; compile_seconds from the init-engine line's `(compilation: X s`, else
`torch.compile took X s in total`; cuda_graph_seconds from `Graph capturing finished in N secs`
(vLLM rounds it to whole seconds). Scalars that several ranks log are taken from the lowest rank.
cuda_graph_gib is the captured size."""

from __future__ import annotations

import re
from typing import Any, BinaryIO

from composegen.vllm import startup_rules
from composegen.vllm.logstream import Limits, read_blocks
from composegen.vllm.mismatch import mismatches
from composegen.vllm.pyliteral import LiteralError, parse_literal
from composegen.vllm.reports import Mismatch, StartupCheck, StartupError, StartupReport
from composegen.vllm.startup_text import format_text

__all__ = [
    "WARNING_KINDS",
    "Mismatch",
    "StartupCheck",
    "StartupError",
    "StartupReport",
    "format_text",
    "mismatches",
    "parse_startup_log",
    "parse_startup_stream",
]

WARNING_KINDS = startup_rules.WARNING_KINDS
# a long-running server's log can hold thousands; the first ones name the cause
MAX_RUNTIME_ERRORS = 20


def _split(line: str) -> tuple[str | None, str]:
    """(rank key, message) of one ANSI-free line; the key is the process tag, e.g. `Worker_TP1`."""
    line = startup_rules.OUTER.sub("", line, count=1)
    fmt = startup_rules.LOGFMT.search(line)
    head = line[: fmt.start()] if fmt else line[:120]
    proc = startup_rules.PROC.search(head)
    if fmt:
        return (proc.group("proc") if proc else None), line[fmt.end() :]
    msg = line[proc.end() :] if proc else line
    return (proc.group("proc") if proc else None), startup_rules.UVICORN.sub("", msg.strip())


def _rank_order(proc: str | None) -> tuple:
    """Sort key putting rank 0 first: `Worker_TP1` -> (1,), `Worker_PP1_TP0` -> (1, 0); no tag
    last."""
    if proc is None or proc.startswith("#"):  # "#N": the Nth line without a process tag
        return (float("inf"), int(proc[1:]) if proc else 0)
    return tuple(int(n) for n in re.findall(r"(?:DP|PP|PCP|TP|DCP|EP)(\d+)", proc)) or (0,)


class _Collector:
    def __init__(self) -> None:
        self.report = StartupReport()
        self.ranked: dict[str, dict] = {}  # field -> {rank key: value}; a rank's first value wins
        self.firsts: dict[str, Any] = {}
        self.error_keys: set[tuple[str, str]] = set()
        self.saw_traceback = False
        self.last_exception: str | None = None  # the line
        self.engine_failed: str | None = None
        # `Application startup complete.` seen: later exceptions are runtime errors
        self.ready = False
        self.runtime_total = 0
        self.unnamed = 0
        # rank -> [(reused | compiled, match)] of torch.compile's cache lines
        self.cache_lines: dict[str, list[tuple[str, re.Match[str]]]] = {}

    def ranked_value(self, field: str, proc: str | None, value: object) -> None:
        key = proc or f"#{self.unnamed}"
        self.ranked.setdefault(field, {}).setdefault(key, value)

    def lowest_rank(self, field: str) -> Any:
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
        if "version" in msg and (
            m := (startup_rules.VERSION.search(msg) or startup_rules.LOGO_VERSION.search(msg))
        ):
            r.vllm_version = r.vllm_version or m.group(1)
        if startup_rules.NON_DEFAULT_START in msg and "non_default" not in self.firsts:
            self.first("non_default", True)
            self._non_default(msg)
        if "GiB" in msg or "bytes" in msg:
            self._memory(proc, msg)
        if "tokens" in msg:
            self._pool(msg)
        if "took" in msg or "takes" in msg:
            self._timings(proc, msg)
        if "compil" in msg or "cache directory" in msg:
            self._cache(proc, msg)
        if m := startup_rules.MAX_LEN.search(msg):
            self.first("using_max_len", int(m.group(1)))
        if m := startup_rules.STARTED.search(msg):
            r.server_address = r.server_address or m.group(1)
            self.first("started", True)
        if msg.strip() == startup_rules.COMPLETE or msg.endswith(" " + startup_rules.COMPLETE):
            self.first("complete", True)
            self.ready = True

    def _pool(self, msg: str) -> None:
        """The KV cache size and the concurrency it allows."""
        r = self.report
        if m := startup_rules.KV_SIZE.search(msg):
            self.smallest("tokens", int(m.group("tok").replace(",", "")))
            r.kv_cache_includes_host = r.kv_cache_includes_host or m.group("pool").endswith(
                "+ host"
            )
        if m := startup_rules.CONCURRENCY.search(msg):
            self.smallest("concurrency", float(m.group("x")))
            self.first("max_len_line", int(m.group("len").replace(",", "")))

    def _timings(self, proc: str | None, msg: str) -> None:
        """Engine init and compile times."""
        if m := startup_rules.INIT.search(msg):
            self.first("init", float(m.group(1)))
            if m.group(2) is not None:
                self.first("compile", float(m.group(2)))
        if m := startup_rules.COMPILE_TOTAL.search(msg):
            self.ranked_value("compile_total", proc, float(m.group(1)))

    def _cache(self, proc: str | None, msg: str) -> None:
        """torch.compile's cache lines, per rank: the directory, what was loaded or compiled."""
        rank = proc or "#0"
        if m := startup_rules.CACHE_DIRECTORY.search(msg):
            self.ranked_value("cache_directory", rank, m.group(1))
        for what, pattern in startup_rules.CACHE_LINES:
            if m := pattern.search(msg):
                self.cache_lines.setdefault(rank, []).append((what, m))

    def _cache_fields(self, r: StartupReport) -> None:
        r.cache_directory = self.lowest_rank("cache_directory")
        if not self.cache_lines:
            return
        lines = self.cache_lines[min(self.cache_lines, key=_rank_order)]
        for what in ("reused", "compiled"):
            names = [m["what"] for kind, m in lines if kind == what]
            setattr(
                r,
                f"cache_{what}",
                ["AOT compilation" if n == "AOT" else f"graph for {n}" for n in names],
            )
        seconds = {
            what: [float(m["s"]) for kind, m in lines if kind == what and "s" in m.groupdict()]
            for what in ("reused", "compiled")
        }
        r.graph_load_seconds = round(sum(seconds["reused"]), 3) if seconds["reused"] else None
        r.graph_compile_seconds = (
            round(sum(seconds["compiled"]), 3) if seconds["compiled"] else None
        )
        kinds = {"warm" if r.cache_reused else "", "cold" if r.cache_compiled else ""} - {""}
        r.cache = "partial" if len(kinds) == 2 else "warm" if "warm" in kinds else "cold"

    def _memory(self, proc: str | None, msg: str) -> None:
        if m := startup_rules.WEIGHTS.search(msg):
            self.ranked_value("model_loading", proc, float(m.group(1)))
        if m := startup_rules.KV_GIB.search(msg):
            self.ranked_value("kv", proc, float(m.group(1) or m.group(2)))
        if m := startup_rules.FREE.search(msg):
            self.ranked_value("free", proc, (float(m.group(1)), float(m.group(2))))
        if m := startup_rules.UTIL.search(msg):
            self.ranked_value("util", proc, float(m.group(1)))
        if m := startup_rules.USAGE.search(msg):
            self.ranked_value("usage_weights", proc, float(m.group(1)))
            self.ranked_value("usage_peak", proc, float(m.group(2)))
            if m.group(3) is not None:
                self.ranked_value("usage_non_torch", proc, float(m.group(3)))
            self.ranked_value("usage_graphs", proc, float(m.group(4)))
        if m := startup_rules.CURRENT_KV.search(msg):
            gib = (
                float(m.group(1))
                if m.group(2) == "GiB"
                else round(float(m.group(1)) / (1 << 30), 2)
            )
            self.ranked_value("kv_in_use", proc, gib)
        if m := startup_rules.PROFILE_PEAK.search(msg):
            self.ranked_value("profile_peak", proc, float(m.group(1)))
        if m := startup_rules.GRAPHS.search(msg):
            self.ranked_value("graphs", proc, float(m.group("gib")))
            self.ranked_value("graph_secs", proc, float(m.group("secs")))

    def _non_default(self, msg: str) -> None:
        m = startup_rules.NON_DEFAULT.search(msg)
        args: object = None
        if m:
            try:
                args = parse_literal(m.group(1))
            except LiteralError:
                args = None
        if isinstance(args, dict):
            self.report.effective_args = {
                k: "***" if k in startup_rules.SECRET_ARGS else v for k, v in args.items()
            }
            return
        shown = msg[msg.index(startup_rules.NON_DEFAULT_START) :][:80]
        self.report.warnings.append(
            f"the `non-default args:` line is cut off or unreadable ({shown!r}…): the engine's effective args "
            "are unknown, so the profile's flags were not compared with them"
        )

    def _error(self, line: str, kind: str, hint: str, **extra: Any) -> None:
        error = StartupError(line=line.strip(), kind=kind, hint=hint, **extra)
        if (
            self.ready
            and kind not in startup_rules.FATAL_AFTER_READY
            and kind not in startup_rules.WARNING_KINDS
        ):
            self.runtime_total += 1
            if len(self.report.runtime_errors) < MAX_RUNTIME_ERRORS:
                self.report.runtime_errors.append(
                    error.model_copy(update={"hint": startup_rules.RUNTIME_HINT})
                )
        else:
            self.report.errors.append(error)

    def _failures(self, line: str, msg: str) -> None:
        if msg.startswith("Traceback (most recent call last)"):
            self.saw_traceback = True
        elif startup_rules.ENGINE_FAILED.search(msg) and self.engine_failed is None:
            # a wrapper: reported only when nothing more specific is
            self.engine_failed = line.strip()
        elif (
            self.saw_traceback
            and startup_rules.EXCEPTION.match(msg)
            and not any(w in msg for w in startup_rules.WRAPPER_EXCEPTIONS)
        ):
            self.saw_traceback = False
            if self.ready:
                self._dedup_error(line, msg, "exception", startup_rules.EXCEPTION_HINT)
            else:
                self.last_exception = line.strip()
        if self.ready and (m := startup_rules.ENGINE_DEAD.search(msg)):
            self._dedup_error(line, msg[m.start() :], "engine_dead", startup_rules.ENGINE_DEAD_HINT)
        if not startup_rules.FAILURE_ANY.search(msg):
            return
        for kind, pattern, hint in startup_rules.FAILURES:
            m = pattern.search(msg)
            if not m:
                continue
            extra: dict[str, Any] = {}
            if kind == "kv_too_small_for_max_len":
                est = startup_rules.ESTIMATED_LEN.search(msg)
                extra["estimated_max_model_len"] = (
                    int(est.group(1).replace(",", "")) if est else None
                )
                hint = hint.format(
                    fits=f" (at most {extra['estimated_max_model_len']})" if est else ""
                )
                seq_len = startup_rules.SEQ_LEN.search(msg)
                if seq_len:
                    self.first("error_max_len", int(seq_len.group(1).replace(",", "")))
            self._dedup_error(line, msg[m.start() :], kind, hint, **extra)
            break

    def _dedup_error(self, line: str, key: str, kind: str, hint: str, **extra: Any) -> None:
        if (kind, key) in self.error_keys:
            return
        self.error_keys.add((kind, key))
        self._error(line, kind, hint, **extra)

    def finish(self, lines: int, warnings: list[str]) -> StartupReport:
        r, get = self.report, self.firsts.get
        r.lines_parsed = lines
        r.kv_cache_tokens = get("tokens")
        r.max_concurrency = get("concurrency")
        kv = dict(self.ranked.get("kv", {}))
        for proc, gib in self.ranked.get("kv_in_use", {}).items():
            # 0.12+ logs "Available" for rank 0 only; the rest say "in use"
            kv.setdefault(proc, gib)
        r.kv_cache_gib_per_rank = [kv[k] for k in sorted(kv, key=_rank_order)]
        r.kv_cache_gib_min = min(r.kv_cache_gib_per_rank) if r.kv_cache_gib_per_rank else None
        r.weights_gib = _first_not_none(
            self.lowest_rank("usage_weights"), self.lowest_rank("model_loading")
        )
        r.peak_activation_gib = _first_not_none(
            self.lowest_rank("usage_peak"), self.lowest_rank("profile_peak")
        )
        r.non_torch_gib = self.lowest_rank("usage_non_torch")
        r.cuda_graph_gib = _first_not_none(
            self.lowest_rank("graphs"), self.lowest_rank("usage_graphs")
        )
        r.cuda_graph_seconds = self.lowest_rank("graph_secs")
        free = self.lowest_rank("free")
        r.gpu_free_gib, r.gpu_total_gib = free if free else (None, None)
        r.gpu_memory_utilization = self.lowest_rank("util")
        r.engine_init_seconds = get("init")
        r.compile_seconds = _first_not_none(get("compile"), self.lowest_rank("compile_total"))
        r.max_model_len = _first_not_none(
            get("max_len_line"),
            get("using_max_len"),
            _as_int((r.effective_args or {}).get("max_model_len")),
            get("error_max_len"),
        )
        r.ready = bool(get("complete") or get("started"))
        self._cache_fields(r)
        self._unnamed_failure(r)
        if self.runtime_total > len(r.runtime_errors):
            warnings.append(
                f"{self.runtime_total - len(r.runtime_errors)} more runtime errors are not listed"
            )
        r.warnings = [*r.warnings, *warnings]
        return r

    def _unnamed_failure(self, r: StartupReport) -> None:
        """A traceback's last exception, else the engine's wrapper line, when no rule named the
        failure."""
        if any(e.kind not in WARNING_KINDS for e in r.errors):
            return
        if self.last_exception:
            line, kind, hint = self.last_exception, "exception", startup_rules.EXCEPTION_HINT
        elif self.engine_failed:
            line, kind = self.engine_failed, "engine_core_failed"
            hint = startup_rules.ENGINE_FAILED_HINT
        else:
            return
        r.errors.append(StartupError(line=line, kind=kind, hint=hint))


def _first_not_none(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def _as_int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    return value if isinstance(value, int) and value > 0 else None  # -1 / "auto": the engine chose


def _parse(source: BinaryIO | str, limits: Limits) -> StartupReport:
    collector = _Collector()
    lines = 0
    interesting = startup_rules.INTERESTING.search
    for block in read_blocks(source, limits):
        for raw in block.split("\n"):
            if not raw or raw.isspace():
                continue
            lines += 1
            if startup_rules.ACCESS_LINE in raw or startup_rules.STATS_LINE in raw:
                # access and periodic-stats lines: most of a long-running server's log, never a fact
                continue
            # the message only (past `[file.py:N] `): a cheap pre-filter
            if interesting(raw, raw.find("] ") + 1):
                line = startup_rules.ANSI.sub("", raw) if "\x1b" in raw else raw
                collector.feed(line.replace("\r", "").rstrip())
    return collector.finish(lines, limits.warnings)


def parse_startup_log(text: str) -> StartupReport:
    return _parse(text, Limits())


def parse_startup_stream(stream: BinaryIO, limits: Limits | None = None) -> StartupReport:
    """Parse a log file or pipe opened in binary mode, in constant memory (see logstream.Limits)."""
    return _parse(stream, limits if limits is not None else Limits())
