"""Emulated vLLM 0.33 OpenAI-compatible server (stdlib only): a test double and demo mode, never a real engine."""
