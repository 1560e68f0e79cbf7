"""Emulated vLLM 0.33 OpenAI-compatible server (stdlib only): a test double and demo mode, never a
real engine."""

# What other rooms may import (tests/test_architecture.py checks every entry).
__all__ = [
    "gpuledger",
    "image",
]
