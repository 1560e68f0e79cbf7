"""Tests of the stdlib vLLM emulator (composegen.emulator)."""
