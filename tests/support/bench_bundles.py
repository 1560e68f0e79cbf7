"""Two evidence bundles worth a report: the seed's recorded 8,192 and 4,096 startup logs, each with a
ladder and a bench measured on the emulator (a local subprocess, its pacing on), for the report tests."""

from __future__ import annotations

from pathlib import Path

from composegen.bench import closed
from composegen.bench.reports import BenchResult
from composegen.evidence import bundle as evidence
from composegen.evidence import ladder
from composegen.profiles import resolve as profile
from composegen.project import Project
from composegen.vllm import startup
from tests.support.emulator_proc import EmulatorProc
from tests.support.helpers import make_project

DATA = Path(__file__).resolve().parents[1] / "data" / "logs"
ARMS = (
    ("8192-131k", "vllm-0.33.0-r33-8192-arm.log"),
    ("4096-131k", "vllm-0.33.0-r33-4096-arm.log"),
)


def inflated(sweep: BenchResult, n: int) -> BenchResult:
    """SWEEP with N levels shaped as a sweep's (throughput per GPU rising while tokens per user
    fall: most on the frontier), each a copy of its first."""
    first = sweep.levels[0]
    levels = [
        first.model_copy(update={"concurrency": i + 1, "output_throughput_per_gpu": 10.0 + i + i % 7 / 10,
                                 "tokens_per_s_per_user": 10.0 + n - i + i % 5 / 10})
        for i in range(n)
    ]  # fmt: skip
    return sweep.model_copy(update={"levels": levels})


def make_bundles(tmp: Path, levels: int | None = None) -> tuple[Project, list[Path]]:
    """LEVELS: each bench inflated to that many levels (inflated)."""
    make_project(tmp, {}, copy_shipped=True)
    project = Project(tmp)
    runs = []
    env = {"EMU_PREFILL_TOK_S": "40000", "EMU_DECODE_TOK_S": "400"}
    with EmulatorProc.start(tmp, max_model_len=16384, env=env) as emu:
        for seed, (name, log) in enumerate(ARMS):
            text = (DATA / log).read_text(encoding="utf-8")
            report = startup.parse_startup_log(text)
            lad = ladder.run_ladder(
                emu.base_url, emu.model, [1000, 4000], max_model_len=16384, max_tokens=16
            )
            sweep = closed.run_bench(
                emu.base_url,
                emu.model,
                [1, 2, 4],
                input_tokens=200,
                output_tokens=8,
                requests=6,
                seed=seed,
            )
            r = profile.load(project, name)
            runs.append(
                evidence.write_run(
                    project,
                    r,
                    startup_log_text=text,
                    startup_report=report,
                    ladder=lad,
                    bench=inflated(sweep, levels) if levels else sweep,
                    source="log",
                )
            )
    return project, runs


_MADE: list[tuple[Project, list[Path]]] = []


def shared_bundles(tmp_path_factory) -> tuple[Project, list[Path]]:
    """make_bundles once per test session (the report tests only read them)."""
    if not _MADE:
        _MADE.append(make_bundles(tmp_path_factory.mktemp("bundles")))
    return _MADE[0]
