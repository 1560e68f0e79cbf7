"""How long `report --html` takes on a bundle of N bench levels (issue 49: 30,000 levels, 33 MB under
the size cap, ran past a minute when the frontier was checked pairwise). The bundles are the report
tests' (the seed's recorded startup logs, a bench measured on the emulated vLLM: a local
subprocess), their bench inflated to N levels shaped as a sweep's (throughput per GPU rising
while tokens per user fall: most on the front). The report is built in-process, as the CLI does.

    .venv/bin/python bench/bench_report_html.py [--levels 30000]

Results: docs/bench.md (the frontier).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from composegen.evidence import reportpage, runreport
from tests.support.bench_bundles import make_bundles


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--levels", type=int, default=30_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        project, runs = make_bundles(Path(tmp), args.levels)
        size = sum((run / "bench.json").stat().st_size for run in runs)
        started = time.perf_counter()
        doc = runreport.gather([str(r) for r in runs], root=project.root)
        gathered = time.perf_counter()
        html = reportpage.render_html(doc)
        done = time.perf_counter()
    print(
        f"{len(runs)} bundles x {args.levels} levels ({size / 1e6:.1f} MB of bench.json): "
        f"read {gathered - started:.2f} s, page {done - gathered:.2f} s "
        f"({len(html) / 1e6:.1f} MB of HTML)"
    )


if __name__ == "__main__":
    main()
