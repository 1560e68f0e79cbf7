"""The emulator's /metrics: the families, labels and text format a real vLLM serves (recorded from
0.26.0).

The exposition is prometheus_client's text format 1.0.0 as vLLM serves it: every counter `X_total`
and histogram is followed by its own `X_created` gauge family, labels are sorted, values are floats.
The emulator is stdlib-only, so the text is written here rather than by prometheus_client.

What moves with the load: requests running and waiting (admission is capped at --max-num-seqs, the
rest wait, as in vLLM's scheduler), KV usage (blocks held by the running prompts over the GPU
blocks), prompt / generation / prefix-cache-query counters, the finished-reason counter and every
request histogram (TTFT, e2e, queue, prefill, decode, inter-token, token counts). With
--speculative-config the spec-decode counters follow a fixed per-position acceptance (ACCEPT_DECAY).
Not emulated, always 0: prefix cache hits, preemptions, external/multi-modal caches, FLOPs
estimates. The http_* families are http_metrics.py's, fed by the server's http_request() calls.
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter

from composegen.emulator.exposition import Histogram, family, process_families, token_buckets
from composegen.emulator.http_metrics import HttpMetrics

CONTENT_TYPE = "text/plain; version=1.0.0; charset=utf-8"
FINISHED_REASONS = ("stop", "length", "abort", "error", "repetition")
# The recorded bucket bounds by kind; token-count histograms use token_buckets(max_model_len)
# instead.
LATENCY_BUCKETS = {
    kind: tuple(float(b) for b in bounds.split())
    for kind, bounds in {
        "ttft": "0.001 0.005 0.01 0.02 0.04 0.06 0.08 0.1 0.25 0.5 0.75 1 2.5 5 7.5 10 20 40 80 160 640 2560",
        "token_gap": "0.01 0.025 0.05 0.075 0.1 0.15 0.2 0.3 0.4 0.5 0.75 1 2.5 5 7.5 10 20 40 80",
        "request": "0.3 0.5 0.8 1 1.5 2 2.5 5 10 15 20 30 40 50 60 120 240 480 960 1920 7680",
        "iteration": "1 8 16 32 64 128 256 512 1024 2048 4096 8192 16384",
        "n": "1 2 5 10 20",
    }.items()
}
# (name without `vllm:`, bucket kind (LATENCY_BUCKETS, else 1-2-5 token buckets up to
# max-model-len), HELP),
# in the recorded order.
HISTOGRAMS = (
    ("request_prompt_tokens", "tokens", "Number of prefill tokens processed."),
    ("request_generation_tokens", "tokens", "Number of generation tokens processed."),
    ("iteration_tokens_total", "iteration", "Histogram of number of tokens per engine_step."),
    (
        "request_max_num_generation_tokens",
        "tokens",
        "Histogram of maximum number of requested generation tokens.",
    ),
    ("request_params_n", "n", "Histogram of the n request parameter."),
    ("request_params_max_tokens", "tokens", "Histogram of the max_tokens request parameter."),
    ("time_to_first_token_seconds", "ttft", "Histogram of time to first token in seconds."),
    ("inter_token_latency_seconds", "token_gap", "Histogram of inter-token latency in seconds."),
    (
        "request_time_per_output_token_seconds",
        "token_gap",
        "Histogram of time_per_output_token_seconds per request.",
    ),
    ("e2e_request_latency_seconds", "request", "Histogram of e2e request latency in seconds."),
    (
        "request_queue_time_seconds",
        "request",
        "Histogram of time spent in WAITING phase for request.",
    ),
    (
        "request_inference_time_seconds",
        "request",
        "Histogram of time spent in RUNNING phase for request.",
    ),
    (
        "request_prefill_time_seconds",
        "request",
        "Histogram of time spent in PREFILL phase for request.",
    ),
    (
        "request_decode_time_seconds",
        "request",
        "Histogram of time spent in DECODE phase for request.",
    ),
    (
        "request_prefill_kv_computed_tokens",
        "tokens",
        "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
    ),
)
# cache_config_info labels the recording shows, with their values when the runner does not say
# otherwise.
CACHE_CONFIG_DEFAULTS = {
    "_block_size_resolved": "True",
    "block_size": "16",
    "cache_dtype": "auto",
    "calculate_kv_scales": "False",
    "enable_prefix_caching": "True",
    "gpu_memory_utilization": "0.92",
    "is_attention_free": "False",
    "kv_cache_dtype_skip_layers": "[]",
    "kv_cache_memory_bytes": "None",
    "kv_offloading_backend": "native",
    "kv_offloading_size": "None",
    "kv_sharing_fast_prefill": "False",
    "mamba_block_size": "None",
    "mamba_cache_dtype": "auto",
    "mamba_cache_mode": "none",
    "mamba_page_size_padded": "None",
    "mamba_ssm_cache_dtype": "auto",
    "num_cpu_blocks": "None",
    "num_gpu_blocks": "None",
    "num_gpu_blocks_override": "None",
    "prefix_caching_hash_algo": "sha256",
    "prefix_match_unit": "None",
    "skip_page_size_padded": "None",
    "sliding_window": "None",
    "user_specified_block_size": "False",
    "user_specified_mamba_block_size": "False",
}


ACCEPT_DECAY = 0.8
_REASONS = {"tool_calls": "stop"}  # the API says tool_calls; the engine finished with stop


class _Request:
    """When one request arrived, was admitted (scheduled) and had its first token (monotonic
    seconds)."""

    __slots__ = ("arrived", "first_token", "scheduled")

    def __init__(self) -> None:
        self.arrived = time.monotonic()
        self.scheduled = self.arrived
        self.first_token: float | None = None


class _Families:
    """Prometheus families of one engine: each sample carries the engine's labels; a counter comes
    with its `_created` gauge, as vLLM's client library writes it."""

    def __init__(self, base: dict, created: float) -> None:
        self.base, self.created = base, created
        self.out: list[str] = []

    def counter(self, name: str, help_text: str, values: list[tuple[dict, float]]) -> None:
        self.out.extend(
            family(
                f"vllm:{name}_total",
                "counter",
                help_text,
                [({**self.base, **k}, v) for k, v in values],
            )
        )
        self.out.extend(
            family(
                f"vllm:{name}_created",
                "gauge",
                help_text,
                [({**self.base, **k}, self.created) for k, _ in values],
            )
        )

    def gauge(self, name: str, help_text: str, values: list[tuple[dict, float]]) -> None:
        self.out.extend(
            family(f"vllm:{name}", "gauge", help_text, [({**self.base, **k}, v) for k, v in values])
        )


class Metrics:
    """Thread-safe counters for the server's request threads: start() → first_token() → finish(),
    each request in its own thread (the request's timestamps live in a thread-local)."""

    content_type = CONTENT_TYPE

    def __init__(
        self,
        model_name: str,
        kv_tokens: int,
        cache_labels: dict,
        *,
        max_num_seqs: int | None = None,
        max_model_len: int = 8192,
        speculative_config: object = None,
        tool_parser: bool = False,
    ) -> None:
        spec = speculative_config if isinstance(speculative_config, dict) else {}
        spec_tokens = spec.get("num_speculative_tokens")
        spec_tokens = spec_tokens if isinstance(spec_tokens, int) and spec_tokens > 0 else 0
        self._cond = threading.Condition()
        self._local = threading.local()
        self.created = time.time()
        self.model_name = model_name
        self.kv_tokens = max(1, kv_tokens)
        self.block_size = int(cache_labels.get("block_size") or 16)
        self.max_num_seqs = max_num_seqs
        self.spec_tokens = spec_tokens
        self.cache_labels = {
            **CACHE_CONFIG_DEFAULTS,
            **{k: str(v) for k, v in cache_labels.items()},
        }
        self.cache_labels.setdefault("kv_cache_size_tokens", str(self.kv_tokens))
        self.cache_labels.setdefault(
            "kv_cache_max_concurrency", str(self.kv_tokens / max(1, max_model_len))
        )
        self.http = HttpMetrics(self.created)
        self.running = 0
        self.waiting = 0
        self.blocks_in_use = 0
        self.counters: Counter[str] = Counter()
        self.finished: Counter[str] = Counter()
        self.tool_parser = tool_parser
        # (mode, outcome) -> invocations
        self.tool_parser_calls: Counter[tuple[str, str]] = Counter()
        self.accepted_per_pos = [0] * spec_tokens
        self._accept_carry = [0.0] * spec_tokens
        tokens = token_buckets(max_model_len)
        self.histograms = {
            name: Histogram(LATENCY_BUCKETS.get(kind, tokens)) for name, kind, _help in HISTOGRAMS
        }

    # --- the request path
    # ---------------------------------------------------------------------------
    def start(self, prompt_tokens: int) -> None:
        """Admit one request; blocks (counted as waiting) while --max-num-seqs requests are
        running."""
        req = _Request()
        self._local.request = req
        with self._cond:
            self.waiting += 1
            while self.max_num_seqs and self.running >= self.max_num_seqs:
                self._cond.wait()
            self.waiting -= 1
            self.running += 1
            self.blocks_in_use += self._blocks(prompt_tokens)
            self.counters["prefix_cache_queries"] += prompt_tokens
        req.scheduled = time.monotonic()

    def first_token(self, seconds: float) -> None:
        req = getattr(self._local, "request", None)
        if req is not None:
            req.first_token = time.monotonic()
        with self._cond:
            self.histograms["time_to_first_token_seconds"].observe(seconds)

    def finish(
        self, prompt_tokens: int, completion_tokens: int, reason: str, seconds: float
    ) -> None:
        req: _Request | None = getattr(self._local, "request", None)
        self._local.request = None
        now = time.monotonic()
        scheduled = req.scheduled if req else now - seconds
        first = req.first_token if req and req.first_token is not None else scheduled
        reason = _REASONS.get(reason, reason if reason in FINISHED_REASONS else "error")
        decode = max(0.0, now - first)
        with self._cond:
            self.running -= 1
            self.blocks_in_use -= self._blocks(prompt_tokens)
            self._cond.notify()
            self.counters["prompt_tokens"] += prompt_tokens
            self.counters["generation_tokens"] += completion_tokens
            self.finished[reason] += 1
            h = self.histograms
            h["e2e_request_latency_seconds"].observe(seconds)
            h["request_queue_time_seconds"].observe(scheduled - (req.arrived if req else scheduled))
            h["request_inference_time_seconds"].observe(now - scheduled)
            h["request_prefill_time_seconds"].observe(first - scheduled)
            h["request_decode_time_seconds"].observe(decode)
            for name in ("request_prompt_tokens", "request_prefill_kv_computed_tokens"):
                h[name].observe(prompt_tokens)
            for name in (
                "request_generation_tokens",
                "request_max_num_generation_tokens",
                "request_params_max_tokens",
            ):
                h[name].observe(completion_tokens)
            h["request_params_n"].observe(1)
            if completion_tokens > 0:
                # One engine step per output token; the first also carries the prompt.
                h["iteration_tokens_total"].observe(prompt_tokens + 1)
                h["iteration_tokens_total"].observe(1, completion_tokens - 1)
                per_token = decode / max(1, completion_tokens - 1)
                h["inter_token_latency_seconds"].observe(per_token, completion_tokens - 1)
                h["request_time_per_output_token_seconds"].observe(per_token)
            self._speculate(completion_tokens)

    def tool_parsed(self, streaming: bool, called: bool, deltas: int) -> None:
        """The tool parser's work on one chat reply: once per streamed delta, once per non-streamed
        choice."""
        if self.tool_parser:
            with self._cond:
                mode = "streaming" if streaming else "non_streaming"
                self.tool_parser_calls[(mode, "tool_call" if called else "no_tool_call")] += (
                    deltas if streaming else 1
                )

    def _tool_parser_families(self) -> list[str]:
        """vllm:tool_call_parser_invocations_* (the API server's: no engine label), with a tool
        parser only."""
        if not self.tool_parser:
            return []
        help_text = (
            "Total number of ToolParser invocations. Non-streaming increments once per choice; streaming "
            "increments once per delta."
        )
        keys = [
            (mode, outcome, kind)
            for mode in ("streaming", "non_streaming")
            for outcome in ("tool_call", "no_tool_call")
            for kind in ("chat_completions", "responses", "other")
        ]
        labels = [
            ({"mode": m, "model_name": self.model_name, "outcome": o, "request_type": k})
            for m, o, k in keys
        ]
        totals = [
            self.tool_parser_calls[(m, o)] if k == "chat_completions" else 0 for m, o, k in keys
        ]
        name = "vllm:tool_call_parser_invocations"
        return family(
            f"{name}_total", "counter", help_text, list(zip(labels, totals, strict=True))
        ) + family(
            f"{name}_created", "gauge", help_text, [(label, self.created) for label in labels]
        )

    def _blocks(self, tokens: int) -> int:
        return math.ceil(tokens / self.block_size)

    def _speculate(self, completion_tokens: int) -> None:
        """Decode steps of one finished request: each drafts k tokens and emits its own token plus
        the accepted prefix of the draft. Position i is tried only when i - 1 was accepted and then
        accepted with chance ACCEPT_DECAY, made deterministic by one error-diffusion accumulator per
        position; the counters add up exactly to the tokens generated."""
        k, remaining = self.spec_tokens, completion_tokens
        while k > 0 and remaining > 0:
            accepted = 0
            while accepted < min(k, remaining - 1):
                self._accept_carry[accepted] += ACCEPT_DECAY
                if self._accept_carry[accepted] < 1:
                    break
                self._accept_carry[accepted] -= 1
                self.accepted_per_pos[accepted] += 1
                accepted += 1
            self.counters["spec_decode_num_drafts"] += 1
            self.counters["spec_decode_num_draft_tokens"] += k
            self.counters["spec_decode_num_accepted_tokens"] += accepted
            remaining -= 1 + accepted

    def http_request(
        self,
        method: str,
        route: str | None,
        status: int,
        request_bytes: int,
        response_bytes: int,
        seconds: float,
    ) -> None:
        """One answered HTTP request (route None: a path the server does not know)."""
        with self._cond:
            self.http.observe(method, route, status, request_bytes, response_bytes, seconds)

    # --- the exposition
    # ----------------------------------------------------------------------------
    def render(self) -> str:
        with self._cond:
            lines = (
                process_families()
                + self._engine_families()
                + self._tool_parser_families()
                + self.http.render()
            )
        return "\n".join(lines) + "\n"

    def _engine_families(self) -> list[str]:
        f = _Families({"engine": "0", "model_name": self.model_name}, self.created)
        self._scheduler_families(f)
        self._cache_families(f)
        self._token_families(f)
        if self.spec_tokens:
            self._spec_decode_families(f)
        for name, _kind, help_text in HISTOGRAMS:
            f.out.extend(self.histograms[name].render(f"vllm:{name}", help_text, f.base))
            f.out.extend(family(f"vllm:{name}_created", "gauge", help_text, [(f.base, f.created)]))
        f.out.extend(
            family(
                "vllm:cache_config_info",
                "gauge",
                "Information of the LLMEngine CacheConfig",
                [({**self.cache_labels, "engine": "0"}, 1)],
            )
        )
        return f.out

    def _scheduler_families(self, f: _Families) -> None:
        flops = "(for Model Flops Utilization calculations)."
        f.counter(
            "estimated_flops_per_gpu",
            f"Estimated number of floating point operations per GPU {flops}",
            [({}, 0)],
        )
        f.counter(
            "estimated_read_bytes_per_gpu",
            f"Estimated number of bytes read from memory per GPU {flops}",
            [({}, 0)],
        )
        f.counter(
            "estimated_write_bytes_per_gpu",
            f"Estimated number of bytes written to memory per GPU {flops}",
            [({}, 0)],
        )
        f.gauge(
            "num_requests_running",
            "Number of requests in model execution batches.",
            [({}, self.running)],
        )
        f.gauge(
            "num_requests_waiting",
            "Number of requests waiting to be processed.",
            [({}, self.waiting)],
        )
        f.gauge(
            "num_requests_waiting_by_reason",
            "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling capacity; "
            "'deferred' = deferred by transient constraints (LoRA budget, KV transfer, blocked status). "
            "Sum of all reasons equals vllm:num_requests_waiting.",
            [({"reason": "capacity"}, self.waiting), ({"reason": "deferred"}, 0)],
        )
        f.gauge(
            "engine_sleep_state",
            "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; "
            "weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.",
            [
                ({"sleep_state": "awake"}, 1),
                ({"sleep_state": "weights_offloaded"}, 0),
                ({"sleep_state": "discard_all"}, 0),
            ],
        )

    def _cache_families(self, f: _Families) -> None:
        c = self.counters
        num_blocks = max(
            1,
            int(self.cache_labels.get("num_gpu_blocks") or 0) or self.kv_tokens // self.block_size,
        )
        usage = min(1.0, self.blocks_in_use / num_blocks)
        f.gauge("kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", [({}, usage)])
        queries = c["prefix_cache_queries"]
        f.counter(
            "prefix_cache_queries",
            "Prefix cache queries, in terms of number of queried tokens.",
            [({}, queries)],
        )
        f.counter(
            "prefix_cache_hits",
            "Prefix cache hits, in terms of number of cached tokens.",
            [({}, 0)],
        )
        external = "from KV connector cross-instance cache sharing, in terms of number of"
        f.counter(
            "external_prefix_cache_queries",
            f"External prefix cache queries {external} queried tokens.",
            [({}, 0)],
        )
        f.counter(
            "external_prefix_cache_hits",
            f"External prefix cache hits {external} cached tokens.",
            [({}, 0)],
        )
        f.counter(
            "mm_cache_queries",
            "Multi-modal cache queries, in terms of number of queried items.",
            [({}, 0)],
        )
        f.counter(
            "mm_cache_hits",
            "Multi-modal cache hits, in terms of number of cached items.",
            [({}, 0)],
        )

    def _token_families(self, f: _Families) -> None:
        c = self.counters
        f.counter("num_preemptions", "Cumulative number of preemption from the engine.", [({}, 0)])
        f.counter(
            "prompt_tokens", "Number of prefill tokens processed.", [({}, c["prompt_tokens"])]
        )
        sources = [
            ("local_compute", c["prompt_tokens"]),
            ("local_cache_hit", 0),
            ("external_kv_transfer", 0),
        ]
        f.counter(
            "prompt_tokens_by_source",
            "Number of prompt tokens by source.",
            [({"source": s}, v) for s, v in sources],
        )
        f.counter(
            "prompt_tokens_cached", "Number of cached prompt tokens (local + external).", [({}, 0)]
        )
        f.counter(
            "generation_tokens",
            "Number of generation tokens processed.",
            [({}, c["generation_tokens"])],
        )
        f.counter(
            "request_success",
            "Count of successfully processed requests.",
            [({"finished_reason": r}, self.finished[r]) for r in FINISHED_REASONS],
        )

    def _spec_decode_families(self, f: _Families) -> None:
        c = self.counters
        f.counter(
            "spec_decode_num_drafts",
            "Number of spec decoding drafts.",
            [({}, c["spec_decode_num_drafts"])],
        )
        f.counter(
            "spec_decode_num_draft_tokens",
            "Number of draft tokens.",
            [({}, c["spec_decode_num_draft_tokens"])],
        )
        f.counter(
            "spec_decode_num_accepted_tokens",
            "Number of accepted tokens.",
            [({}, c["spec_decode_num_accepted_tokens"])],
        )
        f.counter(
            "spec_decode_num_accepted_tokens_per_pos",
            "Accepted tokens per draft position.",
            [({"position": str(i)}, v) for i, v in enumerate(self.accepted_per_pos)],
        )
