"""EMU_FAULT=draft_not_reloaded (vLLM issue 52487): a level-2 wake's `reload_weights` reloads the
target model's weights but not the speculative draft's. At temperature 0 the answers stay equal (the
target verifies every drafted token); only the draft's acceptance collapses, and with it the speed —
an equality probe cannot see it, the spec-decode counters on /metrics can
(vllm:spec_decode_num_accepted_tokens_total / vllm:spec_decode_num_draft_tokens_total).
EMULATED: after such a reload the per-position acceptance drops from metrics.ACCEPT_DECAY to
UNLOADED_ACCEPT."""

from __future__ import annotations

from composegen.emulator.metrics import Metrics

FAULT = "draft_not_reloaded"
UNLOADED_ACCEPT = 0.05  # a draft with no weights of its own: its tokens seldom match


def after_reload(fault: str | None, metrics: Metrics | None) -> None:
    """`reload_weights` after a level-2 wake: with the fault, the draft stays unloaded."""
    if fault == FAULT and metrics is not None:
        metrics.accept_decay = UNLOADED_ACCEPT
