"""How long `composegen report` takes on a bundle of N bench levels (issue 49: 30,000 levels, 33 MB
under the size cap, ran past a minute). The bundles are the report tests' (the seed's recorded startup
logs, a bench measured on the emulated vLLM: a local subprocess), their bench inflated to N levels
shaped as a sweep's (throughput per GPU rising while tokens per user fall: most on the front) and
written by evidence.bundle.write_run, as `bench` writes them. Each command runs as the CLI
(`python -m composegen report RUN... --html | --markdown | --json`, a fresh interpreter), timed wall
and CPU (its own and its children's).

    .venv/bin/python bench/bench_report_html.py [--levels 1000,10000,30000] [--runs 1]
        [--profile FILE]   # cProfile of the in-process --html report of the largest N

Results: docs/benchmarks.md (`report` of N levels), docs/bench.md (the frontier).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from composegen.evidence import reportpage, reportpng, runreport
from tests.support.bench_bundles import make_bundles

FORMATS = {"html": ["--html", "out.html"], "markdown": ["--markdown"], "json": ["--json"]}


def timed(cmd: list[str], cwd: Path) -> tuple[float, float, int]:
    """Wall s, CPU s (user + system of the command and its children), bytes printed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {done.returncode}\n{done.stderr.decode()[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, len(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--levels", default="1000,10000,30000")
    parser.add_argument("--runs", type=int, choices=(1, 2), default=1, help="1 bundle, or an A/B")
    parser.add_argument("--profile", type=Path, help="write a cProfile of the largest N's --html")
    args = parser.parse_args()
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}, {os.cpu_count()} CPUs")
    for n in [int(x) for x in args.levels.split(",")]:
        with tempfile.TemporaryDirectory() as tmp:
            project, runs = make_bundles(Path(tmp), n)
            runs = runs[: args.runs]
            size = sum((run / "evidence.json").stat().st_size for run in runs)
            print(f"{n} levels, {len(runs)} bundle(s), {size / 1e6:.1f} MB of evidence.json:")
            for name, flags in FORMATS.items():
                cmd = [sys.executable, "-m", "composegen", "report", *map(str, runs), *flags]
                wall, cpu, printed = timed(cmd, project.root)
                out = project.root / "out.html"
                size_out = out.stat().st_size if name == "html" else printed
                print(f"  --{name}: wall {wall:.2f} s, CPU {cpu:.2f} s ({size_out / 1e6:.1f} MB)")
            if args.profile and n == max(int(x) for x in args.levels.split(",")):
                with cProfile.Profile() as prof:
                    doc = runreport.gather([str(r) for r in runs], root=project.root)
                    reportpage.render_html(doc)
                    reportpng.render_png(doc)
                prof.dump_stats(args.profile)
                print(f"  profile of the in-process --html: {args.profile}")
        print(f"  load average now {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
