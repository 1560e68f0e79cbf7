"""The vLLM families the emulator's /metrics writes: their names, HELP texts, labels and bucket
bounds (recorded from 0.26.0), rendered from the counters of metrics.Metrics."""

from __future__ import annotations

from collections import Counter
from typing import Any, Protocol

from composegen.emulator.exposition import Histogram, family


class Metrics(Protocol):
    """What the families read of metrics.Metrics (a protocol: metrics.py imports this module)."""

    accepted_per_pos: list[int]
    block_size: int
    blocks_in_use: int
    cache_labels: dict[str, str]
    counters: Counter[str]
    created: float
    finished: Counter[str]
    histograms: dict[str, Histogram]
    kv_tokens: int
    model_name: str
    running: int
    spec_tokens: int
    tool_parser: bool
    tool_parser_calls: Counter[tuple[str, str]]
    waiting: int


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
# One line per histogram, in the recorded order: name without `vllm:`, bucket kind (LATENCY_BUCKETS,
# else 1-2-5 token buckets up to max-model-len), HELP.
HISTOGRAMS = tuple(
    tuple(line.split(" ", 2))
    for line in """
request_prompt_tokens tokens Number of prefill tokens processed.
request_generation_tokens tokens Number of generation tokens processed.
iteration_tokens_total iteration Histogram of number of tokens per engine_step.
request_max_num_generation_tokens tokens Histogram of maximum number of requested generation tokens.
request_params_n n Histogram of the n request parameter.
request_params_max_tokens tokens Histogram of the max_tokens request parameter.
time_to_first_token_seconds ttft Histogram of time to first token in seconds.
inter_token_latency_seconds token_gap Histogram of inter-token latency in seconds.
request_time_per_output_token_seconds token_gap Histogram of time_per_output_token_seconds per request.
e2e_request_latency_seconds request Histogram of e2e request latency in seconds.
request_queue_time_seconds request Histogram of time spent in WAITING phase for request.
request_inference_time_seconds request Histogram of time spent in RUNNING phase for request.
request_prefill_time_seconds request Histogram of time spent in PREFILL phase for request.
request_decode_time_seconds request Histogram of time spent in DECODE phase for request.
request_prefill_kv_computed_tokens tokens Histogram of new KV tokens computed during prefill (excluding cached tokens).
""".strip().splitlines()
)
# cache_config_info labels the recording shows, with their values when the runner does not say
# otherwise.
_CACHE_CONFIG = """
_block_size_resolved=True block_size=16 cache_dtype=auto calculate_kv_scales=False
enable_prefix_caching=True gpu_memory_utilization=0.92 is_attention_free=False
kv_cache_dtype_skip_layers=[] kv_cache_memory_bytes=None kv_offloading_backend=native
kv_offloading_size=None kv_sharing_fast_prefill=False mamba_block_size=None
mamba_cache_dtype=auto mamba_cache_mode=none mamba_page_size_padded=None
mamba_ssm_cache_dtype=auto num_cpu_blocks=None num_gpu_blocks=None num_gpu_blocks_override=None
prefix_caching_hash_algo=sha256 prefix_match_unit=None skip_page_size_padded=None
sliding_window=None user_specified_block_size=False user_specified_mamba_block_size=False
"""
CACHE_CONFIG_DEFAULTS = {
    k: v for k, _, v in (item.partition("=") for item in _CACHE_CONFIG.split())
}


class Families:
    """Prometheus families of one engine: each sample carries the engine's labels; a counter comes
    with its `_created` gauge, as vLLM's client library writes it."""

    def __init__(self, base: dict, created: float) -> None:
        self.base, self.created = base, created
        self.out: list[str] = []

    def counter(self, name: str, help_text: str, values: list[tuple[dict, float]]) -> None:
        self.gauge(f"{name}_total", help_text, values, "counter")
        self.gauge(f"{name}_created", help_text, [(k, self.created) for k, _ in values])

    def gauge(
        self, name: str, help_text: str, values: list[tuple[dict, float]], kind: str = "gauge"
    ) -> None:
        samples = [({**self.base, **k}, v) for k, v in values]
        self.out.extend(family(f"vllm:{name}", kind, help_text, samples))


def tool_parser_families(m: Metrics) -> list[str]:
    """vllm:tool_call_parser_invocations_* (the API server's: no engine label), with a tool
    parser only."""
    if not m.tool_parser:
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
        ({"mode": mode, "model_name": m.model_name, "outcome": o, "request_type": k})
        for mode, o, k in keys
    ]
    totals = [
        m.tool_parser_calls[(mode, o)] if k == "chat_completions" else 0 for mode, o, k in keys
    ]
    name = "vllm:tool_call_parser_invocations"
    return family(
        f"{name}_total", "counter", help_text, list(zip(labels, totals, strict=True))
    ) + family(f"{name}_created", "gauge", help_text, [(label, m.created) for label in labels])


def engine_families(m: Metrics) -> list[str]:
    f = Families({"engine": "0", "model_name": m.model_name}, m.created)
    c = m.counters
    blocks = max(1, int(m.cache_labels.get("num_gpu_blocks") or 0) or m.kv_tokens // m.block_size)
    waiting_by_reason = [({"reason": "capacity"}, m.waiting), ({"reason": "deferred"}, 0)]
    sleep_states = ("awake", "weights_offloaded", "discard_all")
    sources = {"local_compute": c["prompt_tokens"], "local_cache_hit": 0, "external_kv_transfer": 0}
    # (kind, name without `vllm:`, a value or the labelled samples), in the recorded order
    families: list[tuple[str, str, float | list[Any]]] = [
        ("counter", "estimated_flops_per_gpu", 0),
        ("counter", "estimated_read_bytes_per_gpu", 0),
        ("counter", "estimated_write_bytes_per_gpu", 0),
        ("gauge", "num_requests_running", m.running),
        ("gauge", "num_requests_waiting", m.waiting),
        ("gauge", "num_requests_waiting_by_reason", waiting_by_reason),
        (
            "gauge",
            "engine_sleep_state",
            [({"sleep_state": s}, int(s == "awake")) for s in sleep_states],
        ),
        ("gauge", "kv_cache_usage_perc", min(1.0, m.blocks_in_use / blocks)),
        ("counter", "prefix_cache_queries", c["prefix_cache_queries"]),
        ("counter", "prefix_cache_hits", 0),
        ("counter", "external_prefix_cache_queries", 0),
        ("counter", "external_prefix_cache_hits", 0),
        ("counter", "mm_cache_queries", 0),
        ("counter", "mm_cache_hits", 0),
        ("counter", "num_preemptions", 0),
        ("counter", "prompt_tokens", c["prompt_tokens"]),
        ("counter", "prompt_tokens_by_source", [({"source": s}, v) for s, v in sources.items()]),
        ("counter", "prompt_tokens_cached", 0),
        ("counter", "generation_tokens", c["generation_tokens"]),
        (
            "counter",
            "request_success",
            [({"finished_reason": r}, m.finished[r]) for r in FINISHED_REASONS],
        ),
    ]
    if m.spec_tokens:
        families += [("counter", name, c[name]) for name in SPEC_COUNTERS]
        per_pos = [({"position": str(i)}, v) for i, v in enumerate(m.accepted_per_pos)]
        families.append(("counter", "spec_decode_num_accepted_tokens_per_pos", per_pos))
    for kind, name, values in families:
        samples = values if isinstance(values, list) else [({}, values)]
        getattr(f, kind)(name, HELP[name], samples)
    for name, _kind, help_text in HISTOGRAMS:
        f.out.extend(m.histograms[name].render(f"vllm:{name}", help_text, f.base))
        f.out.extend(family(f"vllm:{name}_created", "gauge", help_text, [(f.base, f.created)]))
    f.out.extend(
        family(
            "vllm:cache_config_info",
            "gauge",
            "Information of the LLMEngine CacheConfig",
            [({**m.cache_labels, "engine": "0"}, 1)],
        )
    )
    return f.out


SPEC_COUNTERS = (
    "spec_decode_num_drafts",
    "spec_decode_num_draft_tokens",
    "spec_decode_num_accepted_tokens",
)
_FLOPS = "(for Model Flops Utilization calculations)."
_EXTERNAL = "from KV connector cross-instance cache sharing, in terms of number of"
HELP = {
    "estimated_flops_per_gpu": f"Estimated number of floating point operations per GPU {_FLOPS}",
    "estimated_read_bytes_per_gpu": f"Estimated number of bytes read from memory per GPU {_FLOPS}",
    "estimated_write_bytes_per_gpu": f"Estimated number of bytes written to memory per GPU {_FLOPS}",
    "num_requests_running": "Number of requests in model execution batches.",
    "num_requests_waiting": "Number of requests waiting to be processed.",
    "num_requests_waiting_by_reason": "Number of waiting requests by reason. Reason labels: "
    "'capacity' = waiting for scheduling capacity; 'deferred' = deferred by transient constraints "
    "(LoRA budget, KV transfer, blocked status). Sum of all reasons equals vllm:num_requests_waiting.",
    "engine_sleep_state": "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means "
    "engine is awake; weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.",
    "kv_cache_usage_perc": "KV-cache usage. 1 means 100 percent usage.",
    "prefix_cache_queries": "Prefix cache queries, in terms of number of queried tokens.",
    "prefix_cache_hits": "Prefix cache hits, in terms of number of cached tokens.",
    "external_prefix_cache_queries": f"External prefix cache queries {_EXTERNAL} queried tokens.",
    "external_prefix_cache_hits": f"External prefix cache hits {_EXTERNAL} cached tokens.",
    "mm_cache_queries": "Multi-modal cache queries, in terms of number of queried items.",
    "mm_cache_hits": "Multi-modal cache hits, in terms of number of cached items.",
    "num_preemptions": "Cumulative number of preemption from the engine.",
    "prompt_tokens": "Number of prefill tokens processed.",
    "prompt_tokens_by_source": "Number of prompt tokens by source.",
    "prompt_tokens_cached": "Number of cached prompt tokens (local + external).",
    "generation_tokens": "Number of generation tokens processed.",
    "request_success": "Count of successfully processed requests.",
    "spec_decode_num_drafts": "Number of spec decoding drafts.",
    "spec_decode_num_draft_tokens": "Number of draft tokens.",
    "spec_decode_num_accepted_tokens": "Number of accepted tokens.",
    "spec_decode_num_accepted_tokens_per_pos": "Accepted tokens per draft position.",
}
