"""How fast does the memory guard stop a loading stack once MemAvailable crosses the floor? (issue 17: < 2 s)

    .venv/bin/python bench/memguard_latency.py [--repeat 5]

Each run: a temporary project with a tiny emulated profile (memory_guard unified, floor 8 GiB, a 60 s load),
`composegen up --emulate` with COMPOSEGEN_MEMINFO pointing at a fake meminfo reading 20 GiB; once the
container runs, the fake file is rewritten to 4 GiB and the time is noted. The latency is Docker's
`FinishedAt` of the container minus that moment. Prints each run, then the best, the median and the worst.
Needs the Docker engine and the base image (scripts/provision.sh). Results: docs/weights.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.stack.test_memguard_engine import container, meminfo, setup  # noqa: E402


def one_run() -> float:
    with tempfile.TemporaryDirectory(prefix="cg-memguard-") as tmp:
        root, name, fake = setup(Path(tmp), load=60, complete=True)
        meminfo(fake, 20.0)
        project = f"composegen-{name}"
        env = {**os.environ, "COMPOSEGEN_MEMINFO": str(fake)}
        argv = [
            sys.executable,
            "-m",
            "composegen",
            "--root",
            str(root),
            "up",
            name,
            "--emulate",
            "--json",
        ]
        proc = subprocess.Popen(
            argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        try:
            while (c := container(project)) is None or not c["State"]["Running"]:
                if proc.poll() is not None:
                    raise SystemExit(f"up ended early: {proc.communicate()[1].decode()[-500:]}")
                time.sleep(0.2)
            time.sleep(1.0)
            crossed = time.time()
            meminfo(fake, 4.0)
            proc.communicate(timeout=60)
            state = container(project)["State"]
            finished = state["FinishedAt"][:26].rstrip("Z") + "+00:00"
            return datetime.fromisoformat(finished).timestamp() - crossed
        finally:
            if proc.poll() is None:
                proc.kill()
            subprocess.run(
                f"docker rm -f $(docker ps -aq --filter label=com.docker.compose.project={project}) 2>/dev/null;"
                f"docker network rm $(docker network ls -q --filter label=com.docker.compose.project={project})"
                " 2>/dev/null",
                shell=True,
                capture_output=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    runs = []
    for i in range(args.repeat):
        runs.append(one_run())
        print(f"run {i + 1}: stopped {runs[-1]:.3f} s after the floor was crossed", flush=True)
    print(
        json.dumps({"best_s": min(runs), "median_s": statistics.median(runs), "worst_s": max(runs)})
    )


if __name__ == "__main__":
    main()
