"""What the emulated vLLM and the product both need to know about GPUs and models (stdlib only: it
ships into the emulator image): the emulated GPUs' shared ledger, and a model's size from its own
config (weights, layers, KV bytes per token).

  ledger.py   one GPU's memory shared by every emulated engine on it: the entries, claim, sleep, wake
  models.py   a model's weights per rank, layers and KV bytes per token: its config.json, or the
              configs composegen knows"""

# What other rooms may import (tests/test_architecture.py checks every entry).
__all__ = ["ledger", "models"]
