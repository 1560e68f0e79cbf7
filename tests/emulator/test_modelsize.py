"""The emulator sizes a model's weights from its own config.json (Qwen3-0.6B's real shape: ~1.1 GiB in
bf16, not the seed's 75.51 GiB), found in the Hugging Face cache at the served revision; EMU_WEIGHTS_GIB
still wins, and a model whose config it cannot read keeps the default."""

from __future__ import annotations

import json

import pytest

from composegen.vllm import startup
from tests.support.emulator_proc import EmulatorProc

REV = "c1899de289a04d12100db370d81485cdf75e47ca"
QWEN3_0_6B = {  # the shape Qwen/Qwen3-0.6B's config.json states
    "architectures": ["Qwen3ForCausalLM"],
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


def _weights(tmp_path, env: dict, model: str = "Qwen/Qwen3-0.6B") -> float:
    args = [model, "--revision", REV, "--served-model-name", "q", "--max-model-len", "4096"]
    with EmulatorProc.start(tmp_path, serve_args=args, env=env) as emu:
        report = startup.parse_startup_log(emu.log_path.read_text())
    return report.weights_gib


def test_weights_come_from_the_models_config_in_the_hf_cache(tmp_path):
    snapshot = tmp_path / "hf" / "hub" / "models--Qwen--Qwen3-0.6B" / "snapshots" / REV
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps(QWEN3_0_6B))
    env = {"HF_HOME": str(tmp_path / "hf"), "EMU_WEIGHTS_GIB": ""}
    assert _weights(tmp_path, env) == pytest.approx(1.11, abs=0.02)  # 596 M parameters × 2 bytes
    assert _weights(tmp_path, {**env, "EMU_WEIGHTS_GIB": "3.5"}) == pytest.approx(3.5)
    # without the cache: the config composegen knows (init's starter), and an unknown model the default
    assert _weights(tmp_path, {**env, "HF_HOME": str(tmp_path / "empty")}) == pytest.approx(1.11)
    unknown = _weights(tmp_path, {**env, "HF_HOME": str(tmp_path / "empty")}, model="org/unknown")
    assert unknown == pytest.approx(75.51)
