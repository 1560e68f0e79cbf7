"""Weights per rank from the served model's own config.json, when the emulator can read it: a 0.6 B
model must not report the seed's 75.51 GiB. Used only when EMU_WEIGHTS_GIB is not set.

The config is looked up as vLLM would find it: a local model directory, else the Hugging Face cache
($HF_HUB_CACHE, $HF_HOME/hub or ~/.cache/huggingface/hub) at the served revision (any snapshot when
none is given). Parameters are counted from the transformer shape (embeddings, attention with its KV
heads, gated MLP, norms), times the bytes of its torch_dtype, split over tensor-parallel ranks. A
quantized config (quantization_config) or an unknown shape gives None: the memory model keeps its
default.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

GiB = 1 << 30
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
CONFIG_MAX_BYTES = 1 << 20


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


def _parameters(config: dict) -> int | None:
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
    embeddings = (
        vocab
        * hidden
        * (1 if text.get("tie_word_embeddings", config.get("tie_word_embeddings")) else 2)
    )
    return embeddings + layers * (attention + mlp + 2 * hidden) + hidden


def weights_gib(values: dict, env: Mapping[str, str]) -> float | None:
    """GiB of weights per rank for the parsed `vllm serve` values, or None when the config does not
    say."""
    model = values.get("model")
    if not isinstance(model, str) or not model:
        return None
    path = _config_path(model, values.get("revision"), env)
    try:
        if path is None or not path.is_file() or path.stat().st_size > CONFIG_MAX_BYTES:
            return None
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict) or config.get("quantization_config"):
        return None
    params = _parameters(config)
    dtype_bytes = DTYPE_BYTES.get(
        str(config.get("torch_dtype") or config.get("dtype") or "bfloat16")
    )
    if params is None or dtype_bytes is None:
        return None
    tp = int(values.get("tensor_parallel_size") or 1)
    return round(params * dtype_bytes / GiB / max(tp, 1), 2)
