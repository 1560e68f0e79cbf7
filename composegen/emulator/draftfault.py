"""EMU_FAULT=draft_not_reloaded (vLLM issue 52487): a level-2 wake's `reload_weights` reloads the
target's weights, not the speculative draft's. Answers stay equal at temperature 0 (the target checks
every token); only the draft's acceptance (vLLM's spec_decode_* counters) collapses. EMULATED: the
per-position acceptance drops from metrics.ACCEPT_DECAY to UNLOADED_ACCEPT."""

from __future__ import annotations

from composegen.emulator.metrics import Metrics

FAULT = "draft_not_reloaded"
UNLOADED_ACCEPT = 0.05  # a draft with no weights of its own: its tokens seldom match


def after_reload(fault: str | None, metrics: Metrics | None) -> None:
    if fault == FAULT and metrics is not None:
        metrics.accept_decay = UNLOADED_ACCEPT
