"""Emulated vLLM 0.33 OpenAI-compatible server (stdlib only): a test double and demo mode, never a
real engine. Nothing outside it imports it (tests/test_architecture.py): the product reads what both
need from composegen.sizing, and builds the image from these files (stack/emulatorimage.py)."""

# What other rooms may import: nothing.
__all__ = ()
