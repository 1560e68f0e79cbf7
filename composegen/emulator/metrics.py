"""The emulator's /metrics counters and state: what moves with the load, rendered in the families,
labels and text format a real vLLM serves (recorded from 0.26.0; the families: metrics_families.py).

The exposition is prometheus_client's text format 1.0.0 as vLLM serves it: every counter `X_total`
and histogram is followed by its own `X_created` gauge family, labels are sorted, values are floats.
The emulator is stdlib-only, so the text is written by this package rather than by
prometheus_client.

What moves with the load: requests running and waiting (admission is capped at --max-num-seqs, the
rest wait, as in vLLM's scheduler), KV usage (blocks held by the running prompts over the GPU
blocks), prompt / generation / prefix-cache-query counters, the finished-reason counter and every
request histogram (TTFT, e2e, queue, prefill, decode, inter-token, token counts). With
--speculative-config the spec-decode counters follow a fixed per-position acceptance (ACCEPT_DECAY).
Not emulated, always 0: prefix cache hits, preemptions, external/multi-modal caches, FLOPs
estimates. The http_* families are http_metrics.py's, fed by the server's http_request() calls."""

from __future__ import annotations

import math
import threading
import time
from collections import Counter

from composegen.emulator.exposition import Histogram, process_families, token_buckets
from composegen.emulator.http_metrics import HttpMetrics, HttpRequest
from composegen.emulator.metrics_families import (
    CACHE_CONFIG_DEFAULTS,
    CONTENT_TYPE,
    FINISHED_REASONS,
    HISTOGRAMS,
    LATENCY_BUCKETS,
    engine_families,
    tool_parser_families,
)

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
        self.accept_decay = ACCEPT_DECAY  # lowered by EMU_FAULT=draft_not_reloaded (draftfault.py)
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
                self._accept_carry[accepted] += self.accept_decay
                if self._accept_carry[accepted] < 1:
                    break
                self._accept_carry[accepted] -= 1
                self.accepted_per_pos[accepted] += 1
                accepted += 1
            self.counters["spec_decode_num_drafts"] += 1
            self.counters["spec_decode_num_draft_tokens"] += k
            self.counters["spec_decode_num_accepted_tokens"] += accepted
            remaining -= 1 + accepted

    def http_request(self, request: HttpRequest) -> None:
        with self._cond:
            self.http.observe(request)

    # --- the exposition
    # ----------------------------------------------------------------------------
    def render(self) -> str:
        with self._cond:
            lines = (
                process_families()
                + engine_families(self)
                + tool_parser_families(self)
                + self.http.render()
            )
        return "\n".join(lines) + "\n"
