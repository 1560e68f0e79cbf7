"""What a bench runs, one object for every way in (`bench`, `evidence --bench*`, campaign arms): the
closed loop's concurrencies or the open loop's rates, the sizes every level shares, and whether it
goes via the edge. `check()` refuses (BadInput, exit 2) anything out of bounds before any work: a
bound keeps what the options size (prompts made, connections held, a schedule's length) inside what
one client machine can hold. `result()` is the one place a BenchResult is built, with its
comparability record (the client host's CPU governor and load, the server's /metrics check).
"""

from __future__ import annotations

import dataclasses
import math
import os
import random
from dataclasses import dataclass
from pathlib import Path

from composegen.bench.reports import BenchResult, Comparability, LevelResult
from composegen.errors import BadInput

INF = math.inf
MAX_RATE = 100_000.0  # requests/s of one open-loop level (inf: all at once)
MAX_CONCURRENCY = 4096  # connections held at once by one level
MAX_REQUESTS = 100_000  # requests (and prompts made) per level
MAX_DURATION = 86_400.0  # seconds a level may run: a day
MAX_TOKENS = 1_048_576  # prompt or output tokens per request: the longest contexts served today
MAX_BURSTINESS = 1000.0  # the gamma shape; beyond it the gaps are even (inf says so exactly)
MAX_REPEATS = 100  # --find-max: levels per probed rate
MAX_LEVELS = 64  # --find-max: rates probed
SYS_CPU = Path("/sys/devices/system/cpu")
GAP_MS, GAP_SHARE = 50.0, 0.25  # client mean vs server histogram mean: beyond both, a gap


@dataclass(frozen=True)
class BenchSpec:
    """What every level shares, through the door, beside the edge or open loop."""

    input_tokens: int
    output_tokens: int
    requests: int | None = None  # per level (per path via the edge); else duration
    duration: float | None = None
    seed: int | None = None  # None: a random one, recorded in the result
    goodput: dict[str, float] | None = None  # vLLM's per-request SLOs in ms (--goodput)
    timeout: float = 600
    emulated: bool | None = None  # the stack's engine is the emulator (None: not known)
    levels: tuple[int, ...] = ()  # the closed loop's concurrencies
    rates: tuple[float, ...] = ()  # the open loop's requests/s (inf: all at once)
    burstiness: float = 1.0
    limits: dict[str, float] | None = None  # per-level SLOs (--slo)
    via_edge: bool = False
    api_key: str | None = None
    gpus: int | None = None
    load_start: list[float] | None = None  # the client host's load averages when the run began

    def check(self) -> BenchSpec:
        """Every size in bounds (BadInput names the option), before any request."""
        if (self.requests is None) == (self.duration is None):
            raise BadInput("bench: give exactly one of --requests N or --duration S")
        _bounded("--requests", self.requests, 1, MAX_REQUESTS)
        if self.duration is not None:
            _check_duration(self.duration)
        if not (1 <= self.input_tokens <= MAX_TOKENS and 1 <= self.output_tokens <= MAX_TOKENS):
            raise BadInput(
                f"bench: --input-tokens {self.input_tokens} / --output-tokens {self.output_tokens}: "
                f"must be in [1, {MAX_TOKENS}]"
            )
        if not (self.levels or self.rates) or any(
            not 1 <= c <= MAX_CONCURRENCY for c in self.levels
        ):
            msg = f"bench: --concurrency: positive integers (≤ {MAX_CONCURRENCY}) required, got {list(self.levels)}"
            raise BadInput(msg)
        for rate in self.rates:
            requests_for(rate, self.requests, self.duration)
        return self

    def seeded(self) -> BenchSpec:
        """This spec with its seed (the one asked for, else a random one, recorded) and the client
        host's load at the run's start."""
        seed = self.seed if self.seed is not None else random.SystemRandom().randrange(2**31)
        return dataclasses.replace(self, seed=seed, load_start=self.load_start or load())

    def result(self, model: str, levels: list[LevelResult], **extra: object) -> BenchResult:
        """The run's BenchResult: ok when every level completed something without an error or a
        short output; `extra`: the fields of one way in (arrivals, slos, via_edge, find_max)."""
        return BenchResult.model_validate(
            {
                "model": model,
                "input_tokens": self.input_tokens,
                "input_tokens_exact": not any(lv.input_tokens_off for lv in levels),
                "output_tokens": self.output_tokens,
                "requests": self.requests,
                "duration_s": self.duration,
                "seed": self.seed,
                "goodput_slos_ms": self.goodput,
                "emulated": self.emulated,
                "ok": all(good(lv) for lv in levels),
                "levels": levels,
                "gpus": self.gpus,
                "comparability": Comparability(
                    cpu_governor=governor(),
                    load_start=self.load_start,
                    load_end=load(),
                    server_check=server_check(levels),
                ),
                **extra,
            }
        )


def governor(root: Path = SYS_CPU) -> str:
    """The client host's CPU frequency governor(s), `unknown` without cpufreq in /sys."""
    found = set()
    for path in root.glob("cpu[0-9]*/cpufreq/scaling_governor"):
        try:
            found.add(path.read_text("utf-8", "replace").strip()[:40])
        except OSError:
            continue
    return ", ".join(sorted(found - {""})) or "unknown"


def load() -> list[float] | None:
    try:
        return [round(n, 2) for n in os.getloadavg()]
    except OSError:
        return None


def server_check(levels: list[LevelResult]) -> str:
    """Each level's client TTFT/E2EL mean against the server's histogram mean (/metrics)."""
    pairs = [
        (f"{lv.key()} {name}", client, server)
        for lv in levels
        for name, client, server in (
            ("TTFT", lv.mean_ttft_ms, lv.server_ttft_mean_ms),
            ("E2EL", lv.mean_e2el_ms, lv.server_e2el_mean_ms),
        )
        if client is not None and server is not None
    ]
    gaps = [
        f"{what} mean {client:.1f} ms at the client, {server:.1f} ms at the server"
        for what, client, server in pairs
        if abs(client - server) > max(GAP_MS, GAP_SHARE * client)
    ]
    if not pairs:
        return "unreachable: no /metrics request histograms"
    return "gap: " + "; ".join(gaps) if gaps else "agrees"


def context(bench: BenchResult | None, engine_start: str | None, live: bool) -> Comparability:
    """An evidence bundle's record: its bench's (else, on a live stack, the client host now), and
    how the engine started (its startup report's compile cache)."""
    rec = (bench.comparability if bench else None) or Comparability(
        cpu_governor=governor() if live else "unknown",
        load_start=load() if live else None,
        load_end=None,
        server_check="not run: no bench",
    )
    return rec.model_copy(update={"engine_start": engine_start or "unknown"})


def describe(rec: Comparability) -> str:
    """One line: the context shown beside a run's figures."""
    loads = " → ".join(f"{x[0]:g}" for x in (rec.load_start, rec.load_end) if x) or "unknown"
    return (
        f"client CPU governor {rec.cpu_governor}, load {loads}; engine start "
        f"{rec.engine_start}; server histograms {rec.server_check}"
    )


def good(level: LevelResult) -> bool:
    return level.errors == 0 and level.completed > 0 and level.short_outputs == 0


def requests_for(rate: float, requests: int | None, duration: float | None) -> int:
    """Requests of one open-loop level: --requests N, or rate × --duration S (at least one); its
    schedule must end within MAX_DURATION."""
    if requests is not None:
        _bounded("--requests", requests, 1, MAX_REQUESTS)
        count = requests
    elif rate == INF:
        raise BadInput("bench: --request-rate inf sends everything at once: give --requests N")
    else:
        assert duration is not None
        _check_duration(duration)
        count = max(1, round(rate * duration))
    if count > MAX_REQUESTS:
        msg = f"bench: --request-rate {rate:g} for {duration:g} s is {count} requests a level, at most {MAX_REQUESTS}"
        raise BadInput(msg)
    if rate != INF and count / rate > MAX_DURATION:
        raise BadInput(
            f"bench: --request-rate {rate:g}: {count} request(s) take {count / rate:.3g} s to send, "
            f"at most {MAX_DURATION:g} s a level"
        )
    return count


def _check_duration(duration: float) -> None:
    if not 0 < duration <= MAX_DURATION:
        raise BadInput(f"bench: --duration: seconds in (0, {MAX_DURATION:g}], got {duration:g}")


def _bounded(option: str, value: int | None, low: int, high: int) -> None:
    if value is not None and not low <= value <= high:
        raise BadInput(f"bench: {option}: must be in [{low}, {high}], got {value}")


def check_search(repeats: int, max_levels: int) -> None:
    """--find-max's own counts."""
    _bounded("--repeats", repeats, 1, MAX_REPEATS)
    _bounded("--max-levels", max_levels, 2, MAX_LEVELS)
