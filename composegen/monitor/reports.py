"""The JSON shape of `composegen top --once --json` (`composegen schema --report top`): one sample
of a serving engine's load and rates."""

from __future__ import annotations

from pydantic import Field

from composegen.report import Report


class Latency(Report):
    p50_s: float | None = None
    p95_s: float | None = None
    count: float = 0  # observations in the window


class SpecDecode(Report):
    drafts: float
    draft_tokens: float
    accepted_tokens: float
    acceptance_rate: float | None = None  # accepted / drafted tokens
    mean_acceptance_length: float | None = None  # tokens per draft step: 1 + accepted / drafts
    # accepted / drafts at each draft position
    per_position: list[float | None] = Field(default_factory=list)


class TopSample(Report):
    """`composegen top --once --json`: the engine's load now and its rates over the last window."""

    name: str | None = None
    url: str
    view: str = "single"  # "head" for a multi-node stack: the head's engine serves every request
    # the stack runs the emulated vLLM (a test double); null: not known (--url)
    emulated: bool | None = None
    window_s: float
    running: float | None = None
    waiting: float | None = None
    kv_cache_usage: float | None = None  # 0..1
    prefix_cache_hit_rate: float | None = None  # hits / queried tokens in the window
    prompt_tokens_per_s: float | None = None
    generation_tokens_per_s: float | None = None
    requests_finished: float | None = None  # in the window
    ttft: Latency = Field(default_factory=Latency)
    e2e: Latency = Field(default_factory=Latency)
    preemptions: float | None = None  # in the window
    preemptions_total: float | None = None
    spec_decode: SpecDecode | None = None
