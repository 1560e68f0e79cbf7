"""The stages of a vLLM start, read from the engine's own log lines (pure: no Docker, no clock).

A DeepSeek-sized start takes 10–30 minutes; `created → running → health 200` says nothing about where
those minutes go. `StageTracker` turns lines (each with the time it was logged) into stages:

    pull        pulling the image (bytes; fed by the caller from the engine's pull stream)
    create      creating the container (fed by the caller)
    nodes       waiting for the other nodes of a multi-node launch (k/N nodes)
    start       the engine process starting (first log line until a later stage)
    download    downloading weights (`Using model weights format`, `Fetching N files`)
    weights     loading weights (tqdm `Loading safetensors checkpoint shards: P% Completed | k/N [..]`)
    compile     torch.compile (Dynamo / Inductor lines, until `torch.compile takes|took X s in total`)
    kv_cache    profiling / KV cache (`Model loading took`, `Available KV cache memory`, `KV cache size`)
    graphs      CUDA graph capture (tqdm `Capturing CUDA graphs (mode, kind): P%|..| k/N [..]`)
    api         API server starting (`init engine … took`, `Starting vLLM server on`, uvicorn)
    ready       `Application startup complete.`

A stage can be entered more than once (vLLM compiles inside its profiling run): its time is the sum of
its segments. Rates come from tqdm's own rate field or from our samples; an ETA only where a rate exists.
Formats: shared/real-vllm/0.26.0-h200/*.log and shared/reference/facts-vllm-compose.md §1.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from composegen.vllm.startup_rules import COMPILE_TOTAL

STAGES: dict[str, str] = {
    "pull": "pulling image",
    "create": "creating",
    "nodes": "waiting for nodes",
    "start": "starting engine",
    "download": "downloading weights",
    "weights": "loading weights",
    "compile": "torch.compile",
    "kv_cache": "profiling / KV cache",
    "graphs": "CUDA graph capture",
    "api": "API server starting",
    "ready": "ready",
}

_ANSI = ANSI_CSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_PREFIX = re.compile(
    r"^(?:\d{4}-\d\d-\d\dT[\d:.]+Z? )?(?:[\w.-]+\s+\| )?"  # docker --timestamps, compose's service column
    r"(?:\([\w-]+ pid=\d+\)\s*)*"  # vLLM's process tags, possibly nested
    r"(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[[^\]]+\] ?"
    r"|(?:INFO|WARNING|ERROR):\s+)?"  # vLLM's logger format, or uvicorn's
)
# tqdm: vLLM's weight bar `P% Completed | k/N [elapsed<remaining, rate]`, default bars `P%|███| k/N [..]`.
_TQDM = re.compile(
    r"(?P<pct>\d+)%(?: Completed \||\|[^|]*\|)\s*(?P<k>\d+)/(?P<n>\d+)"
    r"(?: \[(?P<elapsed>[\d:]+)<(?P<left>[\d:?]+),\s*(?P<rate>[\d.?]+\s*(?:it/s|s/it)|\?it/s)?)?"
)
_SHARDS = re.compile(r"^Loading (?:safetensors|pt|npcache|gguf|\w+)(?: checkpoint shards| using \w+ loader)\b")
_CAPTURE = re.compile(r"^Capturing CUDA graphs?(?: shapes)?(?P<what> \([^)]*\))?")
_FETCH = re.compile(r"^Fetching \d+ files?\b")
_NODES_WAIT = re.compile(r"waiting for (?P<n>\d+) remote node|Waiting for remote nodes to join \((?P<k>\d+)/(?P<t>\d+)")
_FAILED = re.compile(
    r"EngineCore failed to start|Engine core initialization failed|EngineCore encountered a fatal error"
    r"|died unexpectedly|Timed out waiting for engine core"
)

# (stage, pattern searched in the cleaned message); the first match wins.
_MARKERS: list[tuple[str, re.Pattern[str]]] = [
    ("ready", re.compile(r"^Application startup complete\.")),
    (
        "api",
        re.compile(
            r"init engine \(profile, create kv cache, warmup model\) took|^Starting vLLM (?:API )?server"
            r"|^Available routes are|^Started server process|^Waiting for application startup"
        ),
    ),
    ("graphs", re.compile(r"^Capturing CUDA graph|Graph capturing finished in")),
    (
        "compile",
        re.compile(
            r"for vLLM's torch\.compile|Dynamo bytecode transform time|Compiling a graph for|Start compiling function"
            r"|Directly load the compiled graph|torch\.compile is turned on"
        ),
    ),
    (
        "kv_cache",
        re.compile(
            r"Model loading took|Available KV cache memory|KV cache size: [\d,]+ tokens|Initial profiling/warmup run"
            r"|Memory profiling takes|memory for KV Cache as specified|Maximum concurrency for"
            + "|"
            + COMPILE_TOTAL.pattern  # the parser's own pattern for the same line
        ),
    ),
    (
        "weights",
        re.compile(
            r"^Loading weights with|Time spent downloading weights"  # the shard bar itself starts the stage
        ),
    ),
    ("download", re.compile(r"^Using model weights format|" + _FETCH.pattern)),
    ("nodes", _NODES_WAIT),
]


def clean(line: str) -> str:
    """One log line as vLLM wrote its message: no colours, no Docker/compose/process/logger prefix; of a tqdm
    line rewritten with carriage returns only its last state."""
    text = _ANSI.sub("", line)
    parts = [p for p in text.split("\r") if p.strip()]
    text = parts[-1] if parts else ""
    return _PREFIX.sub("", text.strip(), count=1).strip()


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
        return self.seconds + (max(0.0, now - self.entered_at) if self.entered_at is not None else 0.0)

    @property
    def percent(self) -> float | None:
        if self.done is None or not self.total:
            return None
        return min(100.0, 100.0 * self.done / self.total)

    def eta(self, now: float) -> float | None:
        """Seconds left: the engine's own estimate aged by the time since it was logged, else from the rate."""
        if self.done is None or self.total is None or self.done >= self.total:
            return None
        if self.eta_s is not None and self.samples:
            return max(0.0, self.eta_s - (now - self.samples[-1][0]))
        if self.rate:
            return (self.total - self.done) / self.rate
        return None


@dataclass
class StageTracker:
    """Feed it (line, epoch-seconds) pairs and caller events; read `current`, `stages`, `view(now)`, `phases()`."""

    started_at: float
    timeout_s: float | None = None
    stages: dict[str, Stage] = field(default_factory=dict)
    current: Stage | None = None
    failed: str | None = None
    last_line: str = ""
    last_line_at: float | None = None

    def begin(self, key: str, at: float, detail: str = "") -> bool:
        """Enter stage `key` (closing the current one); False when it already is the current stage, or the
        start is over (ready is final: later lines are requests, not stages)."""
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

    def progress(self, key: str, done: int, total: int | None, at: float, unit: str = "") -> None:
        """Progress of a stage (entered if it is not current): the rate is measured from our own samples."""
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
        over = self.current is not None and self.current.key == "ready"  # later lines are requests, not the start
        if self.failed is None and not over and _FAILED.search(text):
            self.failed = text
            return True
        if self.current is None or self.current.key in ("pull", "create"):
            self.begin("start", at)
            changed = True
        else:
            changed = False
        bar = _TQDM.search(text)
        if bar and (_SHARDS.search(text) or _CAPTURE.search(text) or _FETCH.search(text)):
            key = "weights" if _SHARDS.search(text) else "graphs" if _CAPTURE.search(text) else "download"
            capture = _CAPTURE.search(text)
            detail = (capture.group("what") or "").strip(" ()") if capture else ""
            self._tqdm(key, bar, at, "shards" if key == "weights" else "graphs" if key == "graphs" else "files")
            if detail:
                self.stages[key].detail = detail
            return True
        for key, pattern in _MARKERS:
            match = pattern.search(text)
            if match is None:
                continue
            if key == "nodes":
                done, total = match.group("k"), match.group("t") or match.group("n")
                self.progress("nodes", int(done) if done else 1, int(total) + (0 if done else 1), at, "nodes")
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

    def view(self, now: float) -> list[dict]:
        """Every stage entered so far, in vLLM's order (a stage can be re-entered, as profiling is around
        torch.compile), as plain data for a display."""
        rows = []
        order = list(STAGES)
        for stage in sorted(self.stages.values(), key=lambda s: order.index(s.key)):
            rows.append(
                {
                    "stage": stage.key,
                    "label": stage.label,
                    "active": stage is self.current and stage.key != "ready" and self.failed is None,
                    "elapsed_s": round(stage.elapsed(now), 1),
                    "done": stage.done,
                    "total": stage.total,
                    "unit": stage.unit,
                    "percent": None if stage.percent is None else round(stage.percent, 1),
                    "rate": None if stage.rate is None else round(stage.rate, 3),
                    "eta_s": None if (eta := stage.eta(now)) is None else round(eta, 1),
                    "detail": stage.detail,
                }
            )
        return rows

    def phases(self, now: float) -> list[dict]:
        """The stages for `up --json` `phases`: `seconds` since the start (like the readiness phases), plus
        how long each stage took and its last progress."""
        return [
            {
                "phase": row["label"],
                "stage": row["stage"],
                "seconds": round(self.stages[row["stage"]].first_at - self.started_at, 3),
                "elapsed_s": row["elapsed_s"],
                "done": row["done"],
                "total": row["total"],
                "unit": row["unit"] or None,
            }
            for row in self.view(now)
        ]

    def summary(self) -> str:
        """`loading weights 3/8` — the current stage with its k/N, for status and error messages."""
        stage = self.current
        if stage is None:
            return "starting"
        if stage.done is not None and stage.total:
            return f"{stage.label} {stage.done}/{stage.total}" + (f" {stage.unit}" if stage.unit == "nodes" else "")
        return stage.label


_LOGGED = re.compile(r" (?P<mo>\d\d)-(?P<d>\d\d) (?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d(?:\.\d+)?) \[")


def logged_times(text: str) -> list[tuple[float, str]]:
    """(seconds, line) for a log without Docker timestamps: vLLM's own `MM-DD HH:MM:SS` (seconds since the
    month's start; the year does not matter for durations), a line without one gets its predecessor's time."""
    rows, at = [], 0.0
    for line in text.splitlines():
        m = _LOGGED.search(_ANSI.sub("", line))
        if m:
            at = ((int(m["d"]) * 24 + int(m["h"])) * 60 + int(m["m"])) * 60 + float(m["s"])
        rows.append((at, line))
    return rows


def from_log(lines: list[tuple[float, str]], started_at: float | None = None) -> StageTracker:
    """A tracker fed a whole recorded log of (epoch seconds, line) pairs."""
    tracker = StageTracker(started_at if started_at is not None else (lines[0][0] if lines else 0.0))
    for at, line in lines:
        tracker.feed(line, at)
    return tracker
