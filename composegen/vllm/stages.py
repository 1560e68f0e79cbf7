"""The stages of a vLLM start, read from the engine's own log lines (pure: no Docker, no clock).

A DeepSeek-sized start takes 10–30 minutes; `created → running → health 200` says nothing about
where those minutes go. `StageTracker` turns lines (each with the time it was logged) into stages
(pull, create, nodes, imports, download, weights, compile, kv_cache, graphs, warmup, api, ready: the
table of what starts each is docs/progress.md). pull and create are fed by the caller; imports runs
from the launch (`launched`), else from the first log line.

A stage can be entered more than once (vLLM compiles inside its profiling run): its time is the sum
of its segments. Rates come from tqdm's own rate field or from our samples; an ETA only where a rate
exists. The phrases are startup_rules.py's (one table with the startup parser). Formats:
shared/real-vllm/0.26.0-h200*/*.log and shared/reference/facts-vllm-compose.md §1."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TypedDict

from composegen.vllm import startup_rules

STAGES: dict[str, str] = {
    "pull": "pulling image",
    "create": "creating",
    "nodes": "waiting for nodes",
    "imports": "imports / starting engine",
    "download": "downloading weights",
    "weights": "loading weights",
    "compile": "torch.compile",
    "kv_cache": "profiling / KV cache",
    "graphs": "CUDA graph capture",
    "warmup": "warm-up",
    "api": "API server starting",
    "ready": "ready",
}

# a sleep's GPU-wide figure (vLLM's sleep mode; composegen/stack/sleepmode.py): at most 6 digits
SLEEP_RESIDUE = re.compile(
    r"Sleep mode freed [\d.]+ GiB memory, (\d{1,6}(?:\.\d+)?) GiB memory is still in use\."
)

# the dev routes sleep mode opens (VLLM_SERVER_DEV_MODE=1) that stack/sleepmode.py calls
SLEEP, WAKE_UP, COLLECTIVE_RPC = "/sleep", "/wake_up", "/collective_rpc"
IS_SLEEPING = "/is_sleeping"

# any terminal escape (tqdm also moves the cursor)
_ANSI = ANSI_CSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def clean(line: str) -> str:
    """One log line as vLLM wrote its message: no colours, no Docker/compose/process/logger prefix;
    of a tqdm line rewritten with carriage returns only its last state."""
    text = _ANSI.sub("", line)
    parts = [p for p in text.split("\r") if p.strip()]
    text = parts[-1] if parts else ""
    return startup_rules.LOGGER_PREFIX.sub("", text.strip(), count=1).strip()


def _seconds(clock: str) -> float | None:
    """tqdm's `MM:SS` / `H:MM:SS` → seconds; None for `?`."""
    if not clock or "?" in clock:
        return None
    total = 0.0
    for piece in clock.split(":"):
        total = total * 60 + float(piece)
    return total


def _rate(text: str | None) -> float | None:
    """tqdm's `12.3it/s` / `1.50s/it` → items per second."""
    if not text or "?" in text:
        return None
    value = float(text.strip().split("s/it")[0].split("it/s")[0])
    if "s/it" in text:
        return 1.0 / value if value > 0 else None
    return value


@dataclass
class Stage:
    key: str
    first_at: float  # when the stage was first entered (epoch seconds)
    seconds: float = 0.0  # closed segments
    entered_at: float | None = None  # the open segment, if the stage is current
    done: int | None = None
    total: int | None = None
    unit: str = ""
    rate: float | None = None  # units per second
    eta_s: float | None = None  # as stated by the engine (tqdm's remaining), else from the rate
    detail: str = ""
    samples: list[tuple[float, int]] = field(default_factory=list)

    @property
    def label(self) -> str:
        return STAGES.get(self.key, self.key)

    def elapsed(self, now: float) -> float:
        return self.seconds + (
            max(0.0, now - self.entered_at) if self.entered_at is not None else 0.0
        )

    @property
    def percent(self) -> float | None:
        if self.done is None or not self.total:
            return None
        return min(100.0, 100.0 * self.done / self.total)

    def eta(self, now: float) -> float | None:
        """Seconds left: the engine's own estimate aged by the time since it was logged, else from
        the rate."""
        if self.done is None or self.total is None or self.done >= self.total:
            return None
        if self.eta_s is not None and self.samples:
            return max(0.0, self.eta_s - (now - self.samples[-1][0]))
        if self.rate:
            return (self.total - self.done) / self.rate
        return None


class StageRow(TypedDict):
    """One stage as a display shows it (StageTracker.view)."""

    stage: str
    label: str
    active: bool
    elapsed_s: float
    done: int | None
    total: int | None
    unit: str
    percent: float | None
    rate: float | None
    eta_s: float | None
    detail: str


class StagePhase(TypedDict):
    """One stage as `up --json` lists it among its `phases` (StageTracker.phases)."""

    phase: str
    stage: str
    seconds: float
    elapsed_s: float
    done: int | None
    total: int | None
    unit: str | None


@dataclass
class StageTracker:
    """Feed it (line, epoch-seconds) pairs and caller events; read `current`, `stages`, `view(now)`,
    `phases()`."""

    started_at: float
    timeout_s: float | None = None
    stages: dict[str, Stage] = field(default_factory=dict)
    current: Stage | None = None
    failed: str | None = None
    last_line: str = ""
    last_line_at: float | None = None
    # an earlier start's load time (evidence/estimate.py): "ready in ≈ N min"
    estimate_s: float | None = None
    estimate_of: str = "an earlier start"  # "a warm start" | "a cold start" (cli/stagelines.py)

    def begin(self, key: str, at: float, detail: str = "") -> bool:
        """Enter stage `key` (closing the current one); False when it already is the current stage,
        or the start is over (ready is final: later lines are requests, not stages)."""
        if self.current is not None and self.current.key == "ready":
            return False
        if self.current is not None and self.current.key == key:
            if detail:
                self.current.detail = detail
            return False
        if self.current is not None and self.current.entered_at is not None:
            self.current.seconds += max(0.0, at - self.current.entered_at)
            self.current.entered_at = None
        stage = self.stages.get(key)
        if stage is None:
            stage = self.stages[key] = Stage(key, first_at=at)
        stage.entered_at = at
        if detail:
            stage.detail = detail
        self.current = stage
        if key == "ready":  # nothing follows: the stage has no duration
            stage.entered_at = None
        return True

    def launched(self, at: float) -> None:
        """The engine's process was launched at `at` (the container started): the imports stage
        begins, as its first log line comes only after Python's imports."""
        if self.current is None or self.current.key in ("pull", "create"):
            self.begin("imports", at)

    def progress(self, key: str, done: int, total: int | None, at: float, unit: str = "") -> None:
        """Progress of a stage (entered if it is not current): the rate is measured from our own
        samples."""
        self.begin(key, at)
        stage = self.stages[key]
        if stage.total != total or (stage.done is not None and done < stage.done):
            stage.samples = []  # a new bar (the next capture pass, the next image layer set)
        stage.done, stage.total, stage.unit, stage.eta_s = done, total, unit or stage.unit, None
        stage.samples.append((at, done))
        first_at, first_done = stage.samples[0]
        if at > first_at and done > first_done:
            stage.rate = (done - first_done) / (at - first_at)

    def feed(self, line: str, at: float) -> bool:
        """One engine log line logged at `at`; True when the stage or its progress changed."""
        text = clean(line)
        if not text:
            return False
        self.last_line, self.last_line_at = text, at
        # later lines are requests, not the start
        over = self.current is not None and self.current.key == "ready"
        if self.failed is None and not over and startup_rules.START_FAILED.search(text):
            self.failed = text
            return True
        if self.current is None or self.current.key in ("pull", "create"):
            self.begin("imports", at)
            changed = True
        else:
            changed = False
        if self._bar(text, at):
            return True
        return self._marker(text, at, changed)

    def _bar(self, text: str, at: float) -> bool:
        """A progress bar of the weights, the graph capture or a download: its stage moves."""
        bar = startup_rules.TQDM.search(text)
        shards, capture, fetch = (
            p.search(text)
            for p in (startup_rules.SHARD_BAR, startup_rules.CAPTURE_BAR, startup_rules.FETCH_BAR)
        )
        if not (bar and (shards or capture or fetch)):
            return False
        key = "weights" if shards else "graphs" if capture else "download"
        detail = (capture.group("what") or "").strip(" ()") if capture else ""
        self._tqdm(
            key, bar, at, "shards" if key == "weights" else "graphs" if key == "graphs" else "files"
        )
        if detail:
            self.stages[key].detail = detail
        return True

    def _marker(self, text: str, at: float, changed: bool) -> bool:
        """The first stage marker the line holds begins its stage (nodes count up)."""
        for key, pattern in startup_rules.STAGE_MARKERS:
            match = pattern.search(text)
            if match is None:
                continue
            if key == "nodes":
                done, total = match.group("k"), match.group("t") or match.group("n")
                self.progress(
                    "nodes", int(done) if done else 1, int(total) + (0 if done else 1), at, "nodes"
                )
                return True
            return self.begin(key, at) or changed
        return changed

    def _tqdm(self, key: str, bar: re.Match[str], at: float, unit: str) -> None:
        self.progress(key, int(bar.group("k")), int(bar.group("n")), at, unit)
        stage = self.stages[key]
        stated = _rate(bar.group("rate"))
        stage.rate = stated if stated is not None else stage.rate
        stage.eta_s = _seconds(bar.group("left") or "")

    def time_left(self, now: float) -> float | None:
        """Seconds left of the startup timeout."""
        return None if self.timeout_s is None else self.timeout_s - (now - self.started_at)

    def view(self, now: float) -> list[StageRow]:
        """Every stage entered so far, in vLLM's order (a stage can be re-entered, as profiling is
        around torch.compile), as plain data for a display."""
        rows: list[StageRow] = []
        order = list(STAGES)
        for stage in sorted(self.stages.values(), key=lambda s: order.index(s.key)):
            rows.append(
                StageRow(
                    stage=stage.key,
                    label=stage.label,
                    active=stage is self.current and stage.key != "ready" and self.failed is None,
                    elapsed_s=round(stage.elapsed(now), 1),
                    done=stage.done,
                    total=stage.total,
                    unit=stage.unit,
                    percent=None if stage.percent is None else round(stage.percent, 1),
                    rate=None if stage.rate is None else round(stage.rate, 3),
                    eta_s=None if (eta := stage.eta(now)) is None else round(eta, 1),
                    detail=stage.detail,
                )
            )
        return rows

    def phases(self, now: float) -> list[StagePhase]:
        """The stages for `up --json` `phases`: `seconds` since the start (like the readiness
        phases), plus how long each stage took and its last progress."""
        return [
            StagePhase(
                phase=row["label"],
                stage=row["stage"],
                seconds=round(self.stages[row["stage"]].first_at - self.started_at, 3),
                elapsed_s=row["elapsed_s"],
                done=row["done"],
                total=row["total"],
                unit=row["unit"] or None,
            )
            for row in self.view(now)
        ]

    def summary(self) -> str:
        """`loading weights 3/8` — the current stage with its k/N, for status and error messages."""
        stage = self.current
        if stage is None:
            return "starting"
        if stage.done is not None and stage.total:
            return f"{stage.label} {stage.done}/{stage.total}" + (
                f" {stage.unit}" if stage.unit == "nodes" else ""
            )
        return stage.label


def is_ready_line(line: str) -> bool:
    """The line vLLM logs when its API server is up (`Application startup complete.`)."""
    return startup_rules.COMPLETE in line


def is_api_server_line(line: str) -> bool:
    """A line of the API server process: on a multi-node stack it names the head."""
    return startup_rules.API_PROCESS in line
