"""A model's size per rank (weights, layers, KV bytes per token) from its own config.json, when at
hand, else from what composegen knows (KNOWN_CONFIGS, KNOWN_FACTS): a 0.6 B model must not report the
seed's 75.51 GiB. The emulator uses them where EMU_WEIGHTS_GIB / EMU_KV_BYTES_PER_TOKEN are not set.

The config is looked up as vLLM would find it: a local model directory, else the Hugging Face cache
($HF_HUB_CACHE, $HF_HOME/hub or ~/.cache/huggingface/hub) at the served revision (any snapshot when
none is given). Parameters are counted from the transformer shape (embeddings, attention with its KV
heads, gated MLP, norms), times the bytes of its torch_dtype, split over tensor-parallel ranks. A
quantized config (quantization_config) or an unknown shape gives what composegen knows, or None:
the memory model keeps its default."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

GiB = 1 << 30
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
CONFIG_MAX_BYTES = 1 << 20


def kv_element_bytes(dtype: object) -> int:
    """Bytes per KV element for a --kv-cache-dtype value: 1 for every fp8 variant, else 2 (`auto`
    stores the model's dtype, taken as bf16 / fp16). So the same memory holds twice the fp8 tokens
    (measured: 21,847,200 bf16 vs 43,661,648 fp8 tokens on one H200, tests/data/real-0.26.0-h200)."""
    return 1 if str(dtype or "auto").lower().startswith("fp8") else 2


def _config_path(model: str, revision: str | None, env: Mapping[str, str]) -> Path | None:
    local = Path(model)
    if local.is_dir():
        return local / "config.json"
    if model.count("/") != 1:
        return None
    hub = env.get("HF_HUB_CACHE") or os.path.join(
        env.get("HF_HOME") or os.path.join(env.get("HOME") or "/root", ".cache", "huggingface"),
        "hub",
    )
    snapshots = Path(hub) / f"models--{model.replace('/', '--')}" / "snapshots"
    if revision:
        return snapshots / revision / "config.json"
    found = sorted(snapshots.glob("*/config.json")) if snapshots.is_dir() else []
    return found[0] if found else None


def _parameters(config: dict) -> tuple[int, int, int] | None:
    """(parameters, layers, KV elements a token per layer) from the transformer shape."""
    nested = config.get("text_config")
    # multimodal configs nest the language model
    text: dict = nested if isinstance(nested, dict) else config
    try:
        hidden, layers = int(text["hidden_size"]), int(text["num_hidden_layers"])
        vocab, inter = int(text["vocab_size"]), int(text["intermediate_size"])
        heads = int(text["num_attention_heads"])
        kv_heads = int(text.get("num_key_value_heads") or heads)
        head_dim = int(text.get("head_dim") or hidden // heads)
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None
    attention = hidden * head_dim * (2 * heads + 2 * kv_heads)  # q and o, k and v
    mlp = 3 * hidden * inter  # gate, up, down
    tied = text.get("tie_word_embeddings", config.get("tie_word_embeddings"))
    embeddings = vocab * hidden * (1 if tied else 2)
    params = embeddings + layers * (attention + mlp + 2 * hidden) + hidden
    return params, layers, 2 * kv_heads * head_dim  # K and V elements a token, every layer


@dataclass(frozen=True)
class ModelFacts:
    """A model's size as one rank of vLLM holds it. kv_bytes_per_token is for a 2-byte cache (the
    memory model scales it by --kv-cache-dtype); weights grow by weights_gib_per_batch_token with
    --max-num-batched-tokens where the source shows they do."""

    weights_gib: float
    kv_bytes_per_token: float | None
    layers: int | None
    source: str
    weights_gib_per_batch_token: float = 0.0
    unreproduced: str | None = None  # a figure the source gives that these facts do not explain

    def weights_at(self, batched: int) -> float:
        return round(self.weights_gib + self.weights_gib_per_batch_token * batched, 6)


# The configs and figures composegen knows without a download: Qwen3-0.6B's config.json (init's
# starter), and the seed's r33 arms (../shared/seeds/r33-batch-token-ab.md) for the quantized
# DeepSeek-V4-Flash-0731, whose config does not give its bytes: its fp8 KV holds 553,243 tokens in
# 15.9871875 GiB (31,028.131 bytes a token, 62,056.262 at 2 bytes); its weights are 75.51 GiB per rank
# at 4,096 batched tokens and 75.64 at 8,192 (a line through both: the seed does not say why).
QWEN3_0_6B = {
    "hidden_size": 1024,
    "intermediate_size": 3072,
    "num_hidden_layers": 28,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 151936,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
}
KNOWN_CONFIGS = {"Qwen/Qwen3-0.6B": QWEN3_0_6B}
SEED = "the seed's r33 batch-token A/B (EMULATED fit)"
KNOWN_FACTS = {
    "deepseek-ai/DeepSeek-V4-Flash-0731": ModelFacts(
        weights_gib=75.38,
        kv_bytes_per_token=62056.262,
        layers=None,
        source=SEED,
        weights_gib_per_batch_token=0.13 / 4096,
        unreproduced="the 8,192 arm's 283,917 KV tokens (2.17x at 131,072): the seed itself calls "
        "the jump to 553,243 at 4,096 unexplained (+4.715% KV bytes, +94.861% tokens); the emulator "
        "counts tokens from the bytes",
    )
}


def _read_config(model: str, values: dict, env: Mapping[str, str]) -> dict | None:
    path = _config_path(model, values.get("revision"), env)
    try:
        if path is None or not path.is_file() or path.stat().st_size > CONFIG_MAX_BYTES:
            return None
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return config if isinstance(config, dict) else None


def facts(values: dict, env: Mapping[str, str]) -> ModelFacts | None:
    """The served model's facts (parsed `vllm serve` VALUES): its config.json at hand, else one
    composegen knows; None when neither says (the memory model keeps its defaults)."""
    model = values.get("model")
    if not isinstance(model, str) or not model:
        return None
    tp = max(int(values.get("tensor_parallel_size") or 1), 1)
    config = _read_config(model, values, env) or KNOWN_CONFIGS.get(model)
    if config is None or config.get("quantization_config"):
        return KNOWN_FACTS.get(model)
    shape = _parameters(config)
    dtype_bytes = DTYPE_BYTES.get(
        str(config.get("torch_dtype") or config.get("dtype") or "bfloat16")
    )
    if shape is None or dtype_bytes is None:
        return KNOWN_FACTS.get(model)
    params, layers, kv_elements = shape
    return ModelFacts(
        weights_gib=round(params * dtype_bytes / GiB / tp, 2),
        kv_bytes_per_token=layers * kv_elements * 2 / tp,  # at 2 bytes, this rank's KV heads
        layers=layers,
        source=f"{model}'s config.json",
    )
