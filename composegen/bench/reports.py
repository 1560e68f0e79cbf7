"""The load benchmark's report shapes: `bench` (BenchResult: one LevelResult per concurrency level;
the figures are defined in stats.py), `bench-via-edge` (its `via_edge`: per level, what a client
sees through the edge's TLS listener and through the door, requests alternated in one run, and
what the edge adds; figures: viaedge.py), `vllm-bench-serve` (one level in vLLM's own result
shape, vllmresult.py) and the per-level deltas `compare` shows (deltas.py)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from composegen.report import Report, described, nullable


class PathFigures(Report):
    """One path's requests of one level (ms; null when no value exists)."""

    completed: int
    errors: int
    error_messages: list[str] = Field(description="up to 5 distinct error messages")
    median_ttft_ms: float | None
    p99_ttft_ms: float | None
    median_itl_ms: float | None
    p99_itl_ms: float | None
    median_e2el_ms: float | None
    p99_e2el_ms: float | None


class EdgeLevel(Report):
    concurrency: int
    door: PathFigures = Field(description="plain HTTP at the operator door (door -> proxy -> vLLM)")
    edge: PathFigures = described(
        "TLS at the public listener with a client key (proxy -> gate -> vLLM)"
    )
    added_ttft_p50_ms: float | None = Field(description="edge minus door, TTFT median")
    added_ttft_p99_ms: float | None
    added_itl_p50_ms: float | None = Field(description="edge minus door, ITL median")
    added_itl_p99_ms: float | None
    added_e2el_p50_ms: float | None
    added_e2el_p99_ms: float | None


class ViaEdgeResult(Report):
    """`composegen schema --report bench-via-edge`."""

    edge: str = Field(description="the edge's name (edge.yaml)")
    url: str = Field(description="the public listener the edge requests went to")
    alias: str = Field(description="the model name the edge requests asked for")
    tls: str = described(
        "how the listener's certificate was verified: the edge's internal CA, the "
        "system's roots, or off (tls.mode off)"
    )
    door_url: str = Field(description="the operator door the direct requests went to")
    alternated: str = Field(description="how the two paths' requests were interleaved")
    emulated: bool | None = Field(description="the stack was the composegen emulator")
    levels: list[EdgeLevel]


class LevelResult(Report):
    concurrency: int = Field(description="requests kept in flight (closed loop); 0: open loop")
    completed: int
    errors: int
    error_messages: list[str] = Field(description="up to 5 distinct error messages of this level")
    duration: float = Field(description="seconds")
    total_input_tokens: int
    total_output_tokens: int
    request_throughput: float = Field(description="completed requests per second")
    output_throughput: float = Field(description="output tokens per second")
    total_token_throughput: float = Field(description="input + output tokens per second")
    request_goodput: float | None = nullable("requests meeting every SLO per second (with SLOs)")
    mean_ttft_ms: float | None = None
    median_ttft_ms: float | None = None
    p90_ttft_ms: float | None = None
    p99_ttft_ms: float | None = None
    mean_tpot_ms: float | None = None
    median_tpot_ms: float | None = None
    p90_tpot_ms: float | None = None
    p99_tpot_ms: float | None = None
    mean_itl_ms: float | None = None
    median_itl_ms: float | None = None
    p90_itl_ms: float | None = None
    p99_itl_ms: float | None = None
    mean_e2el_ms: float | None = None
    median_e2el_ms: float | None = None
    p90_e2el_ms: float | None = None
    p99_e2el_ms: float | None = None
    distinct_prompts: int = described(
        "different prompts sent (a repeated prompt may hit the prefix cache)"
    )
    client_cpu_ms_per_request: float | None = described("the client's own CPU per request sent")
    client_cpu_share: float = described(
        "the client's CPU time / duration: near 1, the client was busy"
    )
    short_outputs: int = Field(
        default=0, description="completed requests whose usage shows fewer output tokens than asked"
    )
    input_tokens_off: int = Field(
        default=0, description="completed requests whose usage shows another prompt size"
    )
    # open loop (openloop.py); null on a closed-loop level
    request_rate: float | Literal["inf"] | None = nullable(
        "requests per second asked (vLLM's --request-rate); null: closed"
    )
    burstiness: float | None = nullable("gamma shape of the gaps between sends (1: Poisson)")
    schedule_seed: int | None = nullable("the arrival schedule's seed")
    achieved_request_rate: float | None = nullable(
        "requests sent / seconds from the level's start to the last send"
    )
    send_lateness_p50_ms: float | None = nullable(
        "actual send time minus scheduled, median over requests"
    )
    send_lateness_p99_ms: float | None = None
    send_lateness_max_ms: float | None = None
    in_flight_mean: float | None = nullable(
        "requests in flight (sent, not finished) seen at each send"
    )
    in_flight_max: int | None = None
    server_queue_mean_ms: float | None = nullable(
        "mean of the server's vllm:request_queue_time_seconds over the level (/metrics)"
    )
    client_queue_p50_ms: float | None = nullable(
        "scheduled to actual send: open loop, the send lateness; closed, the wait for a "
        "slot, every --requests request due at the level's start; null with --duration"
    )
    client_queue_p99_ms: float | None = None
    client_queue_max_ms: float | None = None
    server_ttft_mean_ms: float | None = nullable(
        "the server's vllm:time_to_first_token_seconds mean (/metrics)"
    )
    server_e2el_mean_ms: float | None = nullable(
        "the server's vllm:e2e_request_latency_seconds mean (/metrics)"
    )
    # the frontier (frontier.py), closed and open levels alike
    output_throughput_per_gpu: float | None = nullable(
        "output tokens per second / the stack's GPUs"
    )
    tokens_per_s_per_user: float | None = nullable(
        "interactivity: 1000 / median TPOT ms (tokens/s one user sees)"
    )
    slo_met: bool | None = nullable("every --slo limit held (null: none)")
    slo_failures: list[str] = Field(
        default_factory=list, description="the limits this level broke, with the measured figure"
    )

    def key(self) -> str:
        """How a level is named: `c4` (closed loop) or `r2.5` (open loop)."""
        if self.request_rate is None:
            return f"c{self.concurrency}"
        return f"r{self.request_rate if self.request_rate == 'inf' else f'{self.request_rate:g}'}"


class FindMaxProbe(Report):
    request_rate: float
    passed: bool = Field(description="every repeat met every SLO")
    requests: int = Field(description="requests sent per repeat")
    repeats: int
    failures: list[str] = Field(description="the limits broken, per failing repeat")


class FindMax(Report):
    """`bench --find-max`: bisection on the request rate for the highest one meeting the SLOs
    (MLPerf server style), within bounds and a budget of levels."""

    slos: dict[str, float]
    low: float = Field(description="the lower bound of the search (requests per second)")
    high: float = Field(description="the upper bound")
    max_levels: int = Field(description="the budget of probed rates")
    best_rate: float | None = described(
        "the highest rate that met the SLOs (null: not even the lower bound)"
    )
    first_failing_rate: float | None = described(
        "the lowest rate seen failing (null: the upper bound passed)"
    )
    requests_per_level: int | None = Field(description="--requests (null: --duration decided)")
    repeats: int
    spread: dict[str, float] = described(
        "at best_rate: max − min over the repeats of each SLO figure (ms) and the achieved rate"
    )
    probes: list[FindMaxProbe] = Field(description="in the order run")


class Comparability(Report):
    """The context a result is read in, shown beside its figures (whether two runs compare at all:
    evidence/comparability.py)."""

    cpu_governor: str = described(
        "the client host's scaling_governor(s) (/sys/devices/system/cpu/cpu*/cpufreq); "
        "`unknown`: the host has no cpufreq there (a VM or container)"
    )
    load_start: list[float] | None = described(
        "the client host's 1, 5 and 15-minute load averages at the start (null: unknown)"
    )
    load_end: list[float] | None = Field(description="the same at the end")
    engine_start: Literal["cold", "warm", "partial", "unknown"] = Field(
        default="unknown",
        description="torch.compile's cache at the engine's start (its startup report); unknown: "
        "no startup report was read",
    )
    server_check: str = described(
        "each level's client TTFT/E2EL means against the server's /metrics histograms: "
        "`agrees`, `gap: …` (more than 50 ms and 25% apart), `unreachable: …`, `not run: …`"
    )


class BenchResult(Report):
    """`composegen bench --json`; the `bench` of an evidence bundle."""

    model: str
    input_tokens: int = described("requested prompt tokens per request (sized with /tokenize)")
    input_tokens_exact: bool = described(
        "the API's usage showed exactly input_tokens for every request"
    )
    output_tokens: int = described(
        "max_tokens per request (ignore_eos: the server may still stop early)"
    )
    requests: int | None = described("requests per level (--requests), or null with --duration")
    duration_s: float | None = described("seconds per level (--duration), or null with --requests")
    seed: int
    goodput_slos_ms: dict[str, float] | None = None
    emulated: bool | None = nullable("the stack was the composegen emulator (null: unknown)")
    ok: bool = Field(description="every level completed requests, none failed, none stopped short")
    levels: list[LevelResult] = described(
        "with via_edge: the requests through the edge's public listener (what clients see)"
    )
    via_edge: ViaEdgeResult | None = nullable(
        "`bench --via-edge`: the edge and the operator door side by side, and what the edge adds"
    )
    arrivals: Literal["closed", "open"] = Field(
        default="closed", description="closed: concurrency levels; open: request-rate levels"
    )
    gpus: int | None = nullable("GPUs of the stack (per-GPU figures)")
    slos: dict[str, float] | None = nullable(
        "--slo limits in ms, e.g. {ttft_p99: 500}: each level passes or not"
    )
    find_max: FindMax | None = nullable("bench --find-max's search")
    comparability: Comparability | None = nullable(
        "the run's context (null: a result from before the record)"
    )

    def level(self, concurrency: int) -> LevelResult | None:
        return next((lv for lv in self.levels if lv.concurrency == concurrency), None)


class VllmBenchServeResult(Report):
    """One level as `vllm bench serve --save-result` writes it (`composegen schema --report
    vllm-bench-serve`); the spec_decode_* keys are written only when the server speculated, as vLLM
    does."""

    date: str
    endpoint_type: str = "openai-chat"
    backend: str = "openai-chat"
    label: str | None = None
    model_id: str
    tokenizer_id: str
    num_prompts: int
    request_rate: float | str = "inf"
    burstiness: float = 1.0
    max_concurrency: int | None = Field(description="null: open loop without a cap (as vLLM)")
    duration: float
    completed: int
    failed: int
    total_input_tokens: int
    total_output_tokens: int
    request_throughput: float
    request_goodput: float | None = None
    output_throughput: float
    total_token_throughput: float
    max_output_tokens_per_s: float
    max_concurrent_requests: int
    rtfx: float = 0.0
    mean_ttft_ms: float
    median_ttft_ms: float
    std_ttft_ms: float
    p50_ttft_ms: float
    p90_ttft_ms: float
    p99_ttft_ms: float
    mean_tpot_ms: float
    median_tpot_ms: float
    std_tpot_ms: float
    p50_tpot_ms: float
    p90_tpot_ms: float
    p99_tpot_ms: float
    mean_itl_ms: float
    median_itl_ms: float
    std_itl_ms: float
    p50_itl_ms: float
    p90_itl_ms: float
    p99_itl_ms: float
    mean_e2el_ms: float
    median_e2el_ms: float
    std_e2el_ms: float
    p50_e2el_ms: float
    p90_e2el_ms: float
    p99_e2el_ms: float
    spec_decode_acceptance_rate: float | None = nullable("accepted / draft tokens, percent")
    spec_decode_acceptance_length: float | None = nullable("1 + accepted tokens / drafts")
    spec_decode_num_drafts: int | None = None
    spec_decode_draft_tokens: int | None = None
    spec_decode_accepted_tokens: int | None = None
    spec_decode_per_position_acceptance_rates: list[float] | None = None

    def to_json(self) -> dict[str, Any]:
        data = super().to_json()
        if self.spec_decode_num_drafts is None:
            data = {k: v for k, v in data.items() if not k.startswith("spec_decode_")}
        return data


class BenchDelta(Report):
    concurrency: int
    level: str | None = nullable("an open-loop level: its rate (`r2.5`); null: closed loop")
    metric: str = Field(description="a bench level figure (vllm bench serve's name)")
    unit: str
    a: float | None
    b: float | None
    delta: float | None = Field(description="b − a")
    pct: float | None = Field(description="delta / a × 100")


class BenchDeltas(Report):
    """The `bench` of `composegen compare --json`."""

    levels: list[BenchDelta]
    only_a: list[int] = Field(description="concurrency levels only run a measured")
    only_b: list[int]
    only_a_rates: list[str] = Field(
        default_factory=list, description="open-loop levels (r2, r4, …) only run a measured"
    )
    only_b_rates: list[str] = Field(default_factory=list)
    notes: list[str]
