"""vLLM's sleep mode, emulated after the H200 recording (../shared/real-vllm/0.26.0-h200-sleep/).

The dev-mode routes exist only with VLLM_SERVER_DEV_MODE=1 *and* --enable-sleep-mode (otherwise 404,
as vLLM): POST /sleep?level=1|2&mode=abort|wait|keep, POST /wake_up[?tags=weights|kv_cache]…, GET
/is_sleeping ({"is_sleeping": bool}), POST /collective_rpc {"method": "reload_weights"} ({"results":
[null]}). /sleep and /wake_up answer 200 with an empty body once the engine has finished, as vLLM's
router does. Level 1 keeps the weights in host memory ("backed up in CPU"), level 2 discards them:
its wake is `tags=weights`, `reload_weights`, `tags=kv_cache`. mode=wait lets running requests
finish first; abort ends them at once with finish_reason "abort" (HTTP 200 to their clients); keep
leaves them paused. While asleep, a request to a weight-using route gets no answer until the wake
(the real 0.26.0 gave none within 8 s; its body is read, its hang-up noticed); /health stays 200.

The log lines are the recorded ones (EngineCore: `CuMemAllocator: sleep freed …`, `Sleep mode freed
X GiB memory, Y GiB memory is still in use.`, `It took … seconds to fall asleep.`; `wake up the
engine with tags: …`). Timings: EMU_SLEEP_S (0.04: the engine's own recorded time, 0.035-0.071 s)
and EMU_SLEEP_ROUTE_S (0.09: what /sleep took beyond it, the client's recorded 0.12-0.20 s, median
0.136), EMU_WAKE_S (0.34, the median of the ten recorded level-1 wakes of the 4.6 MB model,
0.28-0.40 s: a wake with nothing to copy back), or the level-1 copy of the weights at EMU_WAKE_GIB_S
(19 GiB/s host to GPU, recorded with 6.5 GiB: 0.34-0.35 s) when that takes longer. The residue is
EMU_SLEEP_RESIDUE_GIB (0.87 recorded); faults:
EMU_FAULT=sleep_residue_growth (+0.5 GiB per cycle, as reported on 4x RTX PRO 6000),
EMU_FAULT=wake_fails (the wake after the first cycle is an error), EMU_FAULT=draft_not_reloaded
(draftfault.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from composegen.emulator import draftfault
from composegen.emulator.metrics import Metrics
from composegen.sizing.ledger import WAKE_ERROR, Ledger

DEV_ROUTES = {
    "/sleep": "POST",
    "/wake_up": "POST",
    "/is_sleeping": "GET",
    "/collective_rpc": "POST",
    # dev mode opens these too (the recording's route list); the emulator has no cache: 200, nothing done
    "/reset_prefix_cache": "POST",
    "/reset_mm_cache": "POST",
    "/reset_encoder_cache": "POST",
}
MODES = ("abort", "wait", "keep")
TAGS = ("weights", "kv_cache")
RESIDUE_GROWTH_GIB = 0.5


def _core(log: Callable[..., None], where: str, text: str, level: str = "INFO") -> None:
    """One of the engine core's log lines (vLLM's EngineCore_DP0 process)."""
    log(level, where, text, "EngineCore_DP0")


class SleepError(Exception):
    """A request the real router refuses: (HTTP status, vLLM's error message)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def env_float(env: Mapping[str, str], name: str, default: float) -> float:
    """NAME from ENV as a number (DEFAULT when unset or empty); ValueError names a bad one."""
    try:
        return float(env.get(name) or default)
    except ValueError:
        raise ValueError(f"{name}={env.get(name)!r} is not a number") from None


@dataclass
class SleepMode:
    held_gib: float  # what the awake engine holds on the GPU (its --gpu-memory-utilization share)
    weights_gib: float
    fault: str | None = None
    sleep_s: float = 0.04
    sleep_route_s: float = 0.09
    wake_s: float = 0.34
    wake_gib_s: float = 19.0
    residue_gib: float = 0.87
    level: int = 0  # 0 awake, 1 or 2 asleep
    asleep_tags: set[str] = field(default_factory=set)  # what is still to wake
    cycles: int = 0
    since: float | None = None  # time.time() of the last sleep
    lock: threading.Lock = field(default_factory=threading.Lock)
    idle: threading.Condition = field(init=False)
    running: int = 0
    aborting: bool = False
    backend_logged: bool = False
    ledger: Ledger | None = None  # the GPUs shared with other emulated engines (gpuledger.py)
    metrics: Metrics | None = None  # the draft's acceptance (EMU_FAULT=draft_not_reloaded)

    def __post_init__(self) -> None:
        self.idle = threading.Condition(self.lock)

    @classmethod
    def from_env(
        cls, env: Mapping[str, str], held_gib: float, weights_gib: float, fault: str | None
    ) -> SleepMode:
        return cls(
            held_gib=held_gib,
            weights_gib=weights_gib,
            fault=fault,
            sleep_s=env_float(env, "EMU_SLEEP_S", 0.04),
            sleep_route_s=env_float(env, "EMU_SLEEP_ROUTE_S", 0.09),
            wake_s=env_float(env, "EMU_WAKE_S", 0.34),
            wake_gib_s=env_float(env, "EMU_WAKE_GIB_S", 19.0),
            residue_gib=env_float(env, "EMU_SLEEP_RESIDUE_GIB", 0.87),
        )

    @property
    def sleeping(self) -> bool:
        return self.level > 0

    def residue(self) -> float:
        grown = max(self.cycles - 1, 0) if self.fault == "sleep_residue_growth" else 0
        return self.residue_gib + RESIDUE_GROWTH_GIB * grown

    def gpu_in_use(self) -> float:
        """What vLLM's `… still in use` line says: the whole GPU's use (the residue and what the
        other engines on it hold: 1.74 GiB recorded beside a sleeping engine), not the engine's."""
        if self.ledger is None:
            return self.residue()
        return self.residue() + self.ledger.total_gib - self.ledger._fullest()[1]

    # --- requests that use the weights ------------------------------------------------------------
    def begin_request(self, gone: Callable[[], bool]) -> bool:
        """Admit a request, waiting with no answer while asleep; False when the client GONE first."""
        with self.lock:
            while self.sleeping:
                if gone():
                    return False
                self.idle.wait(0.1)
            self.running += 1
            return True

    def end_request(self) -> None:
        with self.lock:
            self.running -= 1
            self.idle.notify_all()

    def aborted(self) -> bool:
        """Polled by a request between tokens: True once a /sleep?mode=abort has begun."""
        return self.aborting

    # --- the dev routes ---------------------------------------------------------------------------
    def sleep(self, level: int, mode: str, log: Callable[..., None]) -> None:
        if self._sleep(level, mode, log):
            time.sleep(self.sleep_route_s)  # the router's own part, after the engine's

    def _sleep(self, level: int, mode: str, log: Callable[..., None]) -> bool:
        """The engine's part of /sleep; False when it was asleep already."""
        if level not in (1, 2):
            raise SleepError(400, f"Invalid sleep level: {level}; expected 1 or 2")
        if mode not in MODES:
            raise SleepError(400, f"Invalid mode: {mode}; expected one of {', '.join(MODES)}")
        with self.lock:
            if self.sleeping:
                return False  # vLLM answers 200 to a second /sleep as well
            self._settle(mode, log)
            started = time.monotonic()
            time.sleep(self.sleep_s)
            self.level, self.cycles, self.since = level, self.cycles + 1, time.time()
            self.asleep_tags = set(TAGS)
            backed = self.weights_gib if level == 1 else 0.0
            freed = max(self.held_gib - self.residue(), 0.0)
            if self.ledger is not None:
                self.ledger.hold(self.residue(), "asleep")
            if not self.backend_logged:
                _core(log, "sleep_mode_backend.py:184", "Using sleep-mode backend: cumem")
                self.backend_logged = True
            _core(log, "block_pool.py:790", "Successfully reset prefix cache")
            _core(log, "cumem.py:271", f"CuMemAllocator: sleep freed {freed:.2f} GiB memory in total, "
                  f"of which {backed:.2f} GiB is backed up in CPU and the rest {freed - backed:.2f} GiB "
                  "is discarded directly.")  # fmt: skip
            _core(log, "gpu_worker.py:221", f"Sleep mode freed {freed:.2f} GiB memory, "
                  f"{self.gpu_in_use():.2f} GiB memory is still in use.")  # fmt: skip
            took = time.monotonic() - started
            _core(log, "abstract.py:327", f"It took {took:.6f} seconds to fall asleep.")
            return True

    def _settle(self, mode: str, log: Callable[..., None]) -> None:
        """The running requests before a sleep: finished (wait) or ended (abort); keep leaves them."""
        if self.running and mode == "wait":
            waiting = "Waiting for in-flight requests to complete before sleeping..."
            log("INFO", "core.py:894", waiting, "EngineCore_DP0")
            self.idle.wait_for(lambda: self.running == 0)
        elif self.running and mode == "abort":
            self.aborting = True
            self.idle.wait_for(lambda: self.running == 0, timeout=10)
            self.aborting = False

    def wake(self, tags: list[str], log: Callable[..., None]) -> None:
        unknown = [t for t in tags if t not in TAGS]
        if unknown:
            raise SleepError(400, f"Invalid tags: {unknown}; expected a subset of {list(TAGS)}")
        with self.lock:
            shown = repr(tags) if tags else "None"
            log("INFO", "api_router.py:38", f"wake up the engine with tags: {shown}")
            if not self.sleeping:
                return
            if self.fault == "wake_fails" and self.cycles > 1:
                _core(log, "core.py:1010", "EngineCore wake_up failed: CUDA error: an illegal memory "
                      "access was encountered (emulated fault)", "ERROR")  # fmt: skip
                issue = (
                    "EngineCore encountered an issue. See stack trace (above) for the root cause."
                )
                raise SleepError(500, issue)
            waking = set(tags or TAGS) & self.asleep_tags
            if waking and self.asleep_tags == set(TAGS):  # a wake's first step takes it all back
                self._reclaim(log)
            started, level_1 = time.monotonic(), self.level == 1 and "weights" in waking
            copy = self.weights_gib / self.wake_gib_s if level_1 else 0.0
            # the copy overlaps the rest of the wake: recorded, 6.5 GiB woke in 0.34-0.35 s, as
            # long as 4.6 MB did (0.28-0.40 s); the longer of the two
            time.sleep(max(self.wake_s if "kv_cache" in waking else 0.002, copy))
            self.asleep_tags -= waking
            took = time.monotonic() - started
            named = "{'kv_cache', 'weights'}" if not tags else repr(tags)
            _core(log, "abstract.py:345", f"It took {took:.6f} seconds to wake up tags {named}.")
            if not self.asleep_tags:
                self.level, self.since = 0, None
                self.idle.notify_all()  # the requests that waited for the wake

    def _reclaim(self, log: Callable[..., None]) -> None:
        """The GPU memory back from the ledger, or vLLM's cumem out-of-memory error (still asleep)."""
        if self.ledger is None:
            return
        device, free, taken = self.ledger.claim(self.held_gib)
        if taken:
            return
        _core(log, "emulator.py:3", f"EMULATED GPU ledger: {device} has {free:.2f} GiB free, the "
              f"wake maps {self.held_gib:.2f} GiB")  # fmt: skip
        _core(log, "core.py:1010", f"RuntimeError: {WAKE_ERROR}", "ERROR")
        raise SleepError(500, f"RuntimeError: {WAKE_ERROR}")

    def reload_weights(self, log: Callable[..., None]) -> None:
        with self.lock:
            _core(log, "gpu_model_runner.py:5525", "Reloading weights inplace...")
            took = min(self.weights_gib / 6.5, 30.0)  # recorded: ~6.5 GiB/s from the page cache
            time.sleep(took)
            reloaded = f"Reloading and processing weights took {took:.2f} seconds"
            _core(log, "gpu_model_runner.py:5547", reloaded)
            draftfault.after_reload(self.fault, self.metrics)
