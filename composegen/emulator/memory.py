"""The emulator's GPU memory model: what vLLM's profiler would report for one TP rank.

Per rank, all sizes in GiB (1 GiB = 2**30 bytes):
  requested  = gpu_memory_utilization × EMU_GPU_GIB
  activation = EMU_ACT_BASE_GIB + EMU_ACT_GIB_PER_BATCH_TOKEN × max_num_batched_tokens
  kv         = requested − EMU_WEIGHTS_GIB − activation − EMU_NON_TORCH_GIB − EMU_CUDAGRAPH_GIB
               (or --kv-cache-memory-bytes, which skips profiling as in vLLM)
  host       = --kv-offloading-size / tensor_parallel_size   (the flag is the total across TP ranks)
  tokens     = floor((kv + host) × 2**30 / bytes_per_token), where bytes_per_token is EMU_KV_BYTES_PER_TOKEN
               (a 2-byte cache: auto/bf16/fp16) scaled by --kv-cache-dtype's element size (fp8* = 1
               byte: twice the tokens in the same memory, as the real 0.26.0 recording shows)
  concurrency = tokens / max_model_len                        (printed with 2 decimals)

Defaults reproduce the seed's r33 4,096 arm (TP=2, utilization 0.975, --max-model-len 131072):
weights 75.51, activation 1.14, KV 15.99 GiB, 553,243 tokens, 4.22x. With EMU_WEIGHTS_GIB=75.64 and
--max-num-batched-tokens 8192 it gives the 8,192 arm's 1.73 GiB activation and 15.27 GiB KV (its
token count differs from the seed's 283,917: the seed itself calls that jump unexplained).
EMU_GPU_GIB defaults to 95.0125 (printed 95.01): with exactly 95.01 the 4,096 arm's KV is 15.98475
GiB, which prints as 15.98, and the 8,192 arm's prints as 15.26.

Failures mirror vLLM: kv ≤ 0 -> "No available memory for the cache blocks…"; tokens < max_model_len
-> "To serve at least one request with the model's max seq len (L), …". max_model_len `auto`/-1 fits
the memory (capped at EMU_NATIVE_MAX_MODEL_LEN, which is also the default when the flag is absent).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields

from composegen.emulator import versions
from composegen.sizing import models
from composegen.sizing.ledger import DEFAULT_GPU_GIB

GiB = 1 << 30
DEFAULT_WEIGHTS_GIB = 75.51
DEFAULT_ACT_BASE_GIB = 0.55
DEFAULT_ACT_GIB_PER_BATCH_TOKEN = 0.59 / 4096
DEFAULT_NON_TORCH_GIB = 0.0
DEFAULT_CUDAGRAPH_GIB = 0.0
# Chosen so the 4,096 arm's 15.9871875 GiB holds exactly 553,243 tokens (the interval is ~0.06 bytes
# wide).
DEFAULT_KV_BYTES_PER_TOKEN = 31028.131
DEFAULT_NATIVE_MAX_MODEL_LEN = 131072
DEFAULT_BATCHED_TOKENS = 8192  # vLLM's serve default on large GPUs
DEFAULT_BLOCK_SIZE = 16
BASE_KV_ELEMENT_BYTES = 2  # EMU_KV_BYTES_PER_TOKEN is for a bf16 / fp16 cache


def size_note(facts: models.ModelFacts) -> str:
    """The emulator's own log line: where the model's size came from, and what it cannot
    reproduce."""
    said = f"EMULATED model size from {facts.source}"
    return said + (f"; not reproduced: {facts.unreproduced}" if facts.unreproduced else "")


def gib(value: float) -> str:
    """vLLM 0.16+ `format_gib`: round to 2 decimals and print as Python does (12.0, 15.99)."""
    return str(round(value, 2))


@dataclass
class MemoryInputs:
    gpu_gib: float = DEFAULT_GPU_GIB
    free_gib: float | None = None  # free memory on startup; defaults to the total
    weights_gib: float = DEFAULT_WEIGHTS_GIB
    act_base_gib: float = DEFAULT_ACT_BASE_GIB
    act_gib_per_batch_token: float = DEFAULT_ACT_GIB_PER_BATCH_TOKEN
    non_torch_gib: float = DEFAULT_NON_TORCH_GIB
    cudagraph_gib: float = DEFAULT_CUDAGRAPH_GIB
    kv_bytes_per_token: float = DEFAULT_KV_BYTES_PER_TOKEN
    native_max_model_len: int = DEFAULT_NATIVE_MAX_MODEL_LEN

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> MemoryInputs:
        """Read EMU_<FIELD upper-cased> (e.g. EMU_GPU_GIB, EMU_KV_BYTES_PER_TOKEN); bad numbers
        raise ValueError."""
        values: dict = {}
        for field in fields(cls):
            raw = env.get("EMU_" + field.name.upper())
            if raw not in (None, ""):
                try:
                    values[field.name] = (
                        int(raw) if field.name == "native_max_model_len" else float(raw)
                    )
                except ValueError:
                    raise ValueError(f"EMU_{field.name.upper()}={raw!r} is not a number") from None
        return cls(**values)

    def size_for(self, values: dict, env: Mapping[str, str]) -> models.ModelFacts | None:
        """The served model's weights and KV bytes per token (sizing/models.py) where EMU_WEIGHTS_GIB
        and EMU_KV_BYTES_PER_TOKEN do not say."""
        facts = models.facts(values, env)
        if facts is not None and not env.get("EMU_WEIGHTS_GIB"):
            batched = int(values.get("max_num_batched_tokens") or DEFAULT_BATCHED_TOKENS)
            self.weights_gib = facts.weights_at(batched)
        if facts is not None and facts.kv_bytes_per_token and not env.get("EMU_KV_BYTES_PER_TOKEN"):
            self.kv_bytes_per_token = facts.kv_bytes_per_token
        return facts


@dataclass
class MemoryPlan:
    total_gib: float
    free_gib: float
    utilization: float
    requested_gib: float
    weights_gib: float
    activation_gib: float
    non_torch_gib: float
    cudagraph_gib: float
    kv_gib: float
    host_kv_gib: float
    kv_bytes: int
    kv_tokens: int
    max_model_len: int
    concurrency: float
    block_size: int
    num_gpu_blocks: int
    num_cpu_blocks: int
    kv_size_label: str  # "GPU" or "GPU + host"
    kv_from_flag: bool  # --kv-cache-memory-bytes given: profiling skipped
    error: str | None  # vLLM's ValueError text when the engine cannot start

    def to_json(self) -> dict:
        return asdict(self)


def plan_memory(values: dict, inputs: MemoryInputs) -> MemoryPlan:
    """`values` are parsed `vllm serve` args (ServeArgs.values)."""
    util = float(values.get("gpu_memory_utilization") or 0.92)
    tp = int(values.get("tensor_parallel_size") or 1)
    batched = int(values.get("max_num_batched_tokens") or DEFAULT_BATCHED_TOKENS)
    block_size = int(values.get("block_size") or DEFAULT_BLOCK_SIZE)
    offload_gib = float(values.get("kv_offloading_size") or 0.0)

    requested = util * inputs.gpu_gib
    activation = inputs.act_base_gib + inputs.act_gib_per_batch_token * batched
    fixed_kv = values.get("kv_cache_memory_bytes")
    if fixed_kv:
        kv_gib = int(fixed_kv) / GiB
    else:
        weights, non_torch, graphs = inputs.weights_gib, inputs.non_torch_gib, inputs.cudagraph_gib
        kv_gib = requested - weights - activation - non_torch - graphs
    host_gib = offload_gib / tp if offload_gib > 0 else 0.0
    element_bytes = models.kv_element_bytes(values.get("kv_cache_dtype"))
    bpt = inputs.kv_bytes_per_token * element_bytes / BASE_KV_ELEMENT_BYTES
    kv_bytes = max(0, int(kv_gib * GiB))
    tokens = math.floor((max(kv_gib, 0.0) + host_gib) * GiB / bpt)

    wanted_len = values.get("max_model_len")
    if wanted_len in (None, 0):
        max_len = inputs.native_max_model_len
    elif int(wanted_len) == -1:
        max_len = max(0, min(inputs.native_max_model_len, tokens))
    else:
        max_len = int(wanted_len)

    error = None
    if kv_gib <= 0:
        error = (
            "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
            "when initializing the engine."
        )
    elif max_len <= 0 or tokens < max_len:
        needed = max_len * bpt / GiB
        error = (
            f"To serve at least one request with the model's max seq len ({max_len}), "
            f"({needed:.2f} GiB KV cache is needed, which is larger than the available KV cache memory "
            f"({kv_gib + host_gib:.2f} GiB). Based on the available memory, the estimated maximum model "
            f"length is {tokens}. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` "
            f"when initializing the engine."
        )
    return MemoryPlan(
        total_gib=inputs.gpu_gib,
        free_gib=inputs.free_gib if inputs.free_gib is not None else inputs.gpu_gib,
        utilization=util,
        requested_gib=requested,
        weights_gib=inputs.weights_gib,
        activation_gib=activation,
        non_torch_gib=inputs.non_torch_gib,
        cudagraph_gib=inputs.cudagraph_gib,
        kv_gib=kv_gib,
        host_kv_gib=host_gib,
        kv_bytes=kv_bytes,
        kv_tokens=tokens,
        max_model_len=max_len,
        concurrency=round(tokens / max_len, 2) if max_len > 0 else 0.0,
        block_size=block_size,
        num_gpu_blocks=math.floor(max(kv_gib, 0.0) * GiB / bpt) // block_size,
        num_cpu_blocks=math.floor(host_gib * GiB / bpt) // block_size,
        kv_size_label="GPU + host" if host_gib > 0 else "GPU",
        kv_from_flag=bool(fixed_kv),
        error=error,
    )


def free_memory_line(plan: MemoryPlan) -> str:
    """vLLM's profiling summary line; the planner parses the (F/T GiB), (U, D GiB), W and A
    fields."""
    fit_bytes = plan.kv_bytes
    p = plan
    left = p.free_gib - p.weights_gib - p.activation_gib - p.non_torch_gib - p.cudagraph_gib
    full_bytes = max(0, int(left * GiB))
    return (
        f"Free memory on device ({plan.free_gib:.2f}/{plan.total_gib:.2f} GiB) on startup. "
        f"Desired GPU memory utilization is ({plan.utilization}, {plan.requested_gib:.2f} GiB). "
        f"Actual usage is {plan.weights_gib:.2f} GiB for weight, {plan.activation_gib:.2f} GiB for peak "
        f"activation, {plan.non_torch_gib:.2f} GiB for non-torch memory, and {plan.cudagraph_gib:.2f} GiB "
        f"for CUDAGraph memory. Replace gpu_memory_utilization config with `--kv-cache-memory={fit_bytes}` "
        f"to fit into requested memory, or `--kv-cache-memory={full_bytes}` to fully utilize gpu memory. "
        f"Current kv cache memory in use is {plan.kv_bytes} bytes."
    )


def kv_size_line(plan: MemoryPlan) -> str:
    """The KV pool line(s) as the imitated release logs them (two lines, joined by a newline, up to
    0.27)."""
    size = f"{plan.kv_size_label} KV cache size: {plan.kv_tokens:,} tokens"
    concurrency = f"Maximum concurrency for {plan.max_model_len:,} tokens per request: {plan.concurrency:.2f}x"
    return f"{size}\n{concurrency}" if versions.active().kv_two_lines else f"{size}, {concurrency}"
