"""Prometheus text for the emulator's /metrics, with vLLM 0.33 metric names and labels.

Exposes vllm:num_requests_running / _waiting, vllm:kv_cache_usage_perc (tokens held by running requests /
KV tokens), vllm:prompt_tokens_total, vllm:generation_tokens_total, vllm:request_success_total
{finished_reason}, the vllm:time_to_first_token_seconds and vllm:e2e_request_latency_seconds histograms,
and vllm:cache_config_info (gauge 1 with the cache config as labels, incl. num_gpu_blocks).
"""

from __future__ import annotations

import threading
from collections import Counter

TTFT_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
E2E_BUCKETS = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)


class _Histogram:
    def __init__(self, buckets):
        self.buckets = buckets
        self.counts = [0] * len(buckets)
        self.total = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        for i, upper in enumerate(self.buckets):
            if value <= upper:
                self.counts[i] += 1
        self.total += value
        self.count += 1

    def render(self, name: str, labels: str) -> list[str]:
        lines = [f"# HELP {name} Histogram of {name[5:].replace('_', ' ')}.", f"# TYPE {name} histogram"]
        for upper, count in zip(self.buckets, self.counts):
            lines.append(f'{name}_bucket{{{labels},le="{upper}"}} {float(count)}')
        lines.append(f'{name}_bucket{{{labels},le="+Inf"}} {float(self.count)}')
        lines.append(f"{name}_count{{{labels}}} {float(self.count)}")
        lines.append(f"{name}_sum{{{labels}}} {self.total}")
        return lines


class Metrics:
    def __init__(self, model_name: str, kv_tokens: int, cache_labels: dict):
        self._lock = threading.Lock()
        self.labels = f'engine="0",model_name="{model_name}"'
        self.kv_tokens = max(1, kv_tokens)
        self.cache_labels = cache_labels
        self.running = 0
        self.tokens_in_use = 0
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.finished = Counter()
        self.ttft = _Histogram(TTFT_BUCKETS)
        self.e2e = _Histogram(E2E_BUCKETS)

    def start(self, prompt_tokens: int) -> None:
        with self._lock:
            self.running += 1
            self.tokens_in_use += prompt_tokens

    def first_token(self, seconds: float) -> None:
        with self._lock:
            self.ttft.observe(seconds)

    def finish(self, prompt_tokens: int, completion_tokens: int, reason: str, seconds: float) -> None:
        with self._lock:
            self.running -= 1
            self.tokens_in_use -= prompt_tokens
            self.prompt_tokens += prompt_tokens
            self.generation_tokens += completion_tokens
            self.finished[reason] += 1
            self.e2e.observe(seconds)

    def render(self) -> str:
        with self._lock:
            labels = self.labels
            lines = []

            def metric(name: str, kind: str, value: float, help_text: str, extra: str = "") -> None:
                lines.extend(
                    [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", f"{name}{{{labels}{extra}}} {float(value)}"]
                )

            metric("vllm:num_requests_running", "gauge", self.running, "Number of requests in model execution batches.")
            metric("vllm:num_requests_waiting", "gauge", 0, "Number of requests waiting to be processed.")
            metric(
                "vllm:kv_cache_usage_perc",
                "gauge",
                min(1.0, self.tokens_in_use / self.kv_tokens),
                "KV-cache usage. 1 means 100 percent usage.",
            )
            metric("vllm:prompt_tokens_total", "counter", self.prompt_tokens, "Number of prefill tokens processed.")
            metric(
                "vllm:generation_tokens_total",
                "counter",
                self.generation_tokens,
                "Number of generation tokens processed.",
            )
            lines += [
                "# HELP vllm:request_success_total Count of successfully processed requests.",
                "# TYPE vllm:request_success_total counter",
            ]
            for reason in ("stop", "length", "abort", "tool_calls"):
                lines.append(
                    f'vllm:request_success_total{{{labels},finished_reason="{reason}"}} {float(self.finished[reason])}'
                )
            lines += self.ttft.render("vllm:time_to_first_token_seconds", labels)
            lines += self.e2e.render("vllm:e2e_request_latency_seconds", labels)
            cache = ",".join(f'{key}="{value}"' for key, value in sorted(self.cache_labels.items()))
            lines += [
                "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig",
                "# TYPE vllm:cache_config_info gauge",
                f'vllm:cache_config_info{{{cache},engine="0"}} 1.0',
            ]
        return "\n".join(lines) + "\n"
