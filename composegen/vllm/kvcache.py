"""KV-cache element sizes by `--kv-cache-dtype` (the emulator keeps its own copy: it imports no
composegen).

`auto` stores the model's dtype, taken as a 16-bit one (bf16 / fp16); every fp8 variant stores one
byte per element, so the same memory holds twice the tokens (measured: 21,847,200 bf16 vs 43,661,648
fp8 tokens on one H200, tests/data/real-0.26.0-h200)."""

from __future__ import annotations

from typing import Any


def kv_element_bytes(dtype: Any) -> int:
    return 1 if str(dtype or "auto").lower().startswith("fp8") else 2
