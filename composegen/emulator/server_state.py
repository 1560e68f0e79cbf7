"""What every request of the emulator's HTTP server shares: the serving info, metrics, log and API
keys, the emulated engine-death fault (EMU_FAULT=health_503_after), and the pacing that makes TTFT
and decode rates measurable (EMU_PREFILL_TOK_S, EMU_DECODE_TOK_S and their sleep caps)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from composegen.emulator.chat import ServingInfo
from composegen.emulator.metrics import Metrics
from composegen.emulator.sleep import SleepMode, env_float


@dataclass
class Pacing:
    prefill_tok_s: float = 20000.0
    decode_tok_s: float = 200.0
    prefill_cap_s: float = 2.0
    decode_cap_s: float = 2.0

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Pacing:
        return cls(
            env_float(env, "EMU_PREFILL_TOK_S", cls.prefill_tok_s),
            env_float(env, "EMU_DECODE_TOK_S", cls.decode_tok_s),
            env_float(env, "EMU_PREFILL_SLEEP_CAP_S", cls.prefill_cap_s),
            env_float(env, "EMU_DECODE_SLEEP_CAP_S", cls.decode_cap_s),
        )

    def prefill(self, tokens: int) -> float:
        return (
            min(tokens / self.prefill_tok_s, self.prefill_cap_s) if self.prefill_tok_s > 0 else 0.0
        )

    def per_token(self, tokens: int) -> float:
        if self.decode_tok_s <= 0 or tokens <= 0:
            return 0.0
        return min(1.0 / self.decode_tok_s, self.decode_cap_s / tokens)


@dataclass
class ServerState:
    info: ServingInfo
    metrics: Metrics
    log: Callable[[str, str, str], None]  # (level, source, message)
    api_keys: list[str] = field(default_factory=list)
    pacing: Pacing = field(default_factory=Pacing)
    # --enable-sleep-mode with VLLM_SERVER_DEV_MODE=1 (emulator/sleep.py)
    sleep: SleepMode | None = None
    fault_after_s: float = 5.0
    access_log: bool = True
    ready_at: float = field(default_factory=time.monotonic)
    _dead_logged: bool = False

    def engine_dead(self) -> bool:
        dead = (
            self.info.fault == "health_503_after"
            and time.monotonic() - self.ready_at >= self.fault_after_s
        )
        if dead and not self._dead_logged:
            self._dead_logged = True
            died = "Engine core proc EngineCore_DP0 died unexpectedly, shutting down client."
            self.log("ERROR", "core_client.py:623", f"{died} (EngineDeadError, emulated fault)")
        return dead
