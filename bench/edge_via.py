"""`composegen bench NAME --via-edge` on this machine (issue 38 item 5). Run by hand:
bash bench/edge.sh via [REQUESTS] [CONCURRENCY] — or .venv/bin/python bench/edge_via.py REQUESTS CONCURRENCY

The same project as bench/edge_latency.py (a copy of examples/team-edge, one EMULATED stack behind the
alias, this machine's caddy); then the bench's own client, door and public TLS listener alternated,
256 input / 128 output tokens, REQUESTS per path at each level, and keys.json checked afterwards: the
throw-away key's record must be gone. Results: docs/benchmarks.md.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import edge_latency as setup


def main() -> None:
    requests = sys.argv[1] if len(sys.argv) > 1 else "200"
    levels = sys.argv[2] if len(sys.argv) > 2 else "1"
    root = Path(tempfile.mkdtemp(prefix="edge-via-"))
    project = setup.Project(
        root, f"edgevia{os.getpid()}", setup._free_port(), setup._free_port(), 8
    )
    project.write()
    try:
        setup._cli(root, "render")
        setup._cli(root, "edge", "up")
        setup._cli(root, "up", setup.PROFILE, "--emulate")
        print(
            f"load before: {Path('/proc/loadavg').read_text().split()[:3]}, {os.cpu_count()} CPUs"
        )
        print(
            setup._cli(root, "bench", setup.PROFILE, "--via-edge", "--concurrency", levels,
                       "--requests", requests, "--input-tokens", "256", "--output-tokens", "128"),
        )  # fmt: skip
        print(f"load after: {Path('/proc/loadavg').read_text().split()[:3]}")
        keys = json.loads((root / ".composegen" / "edge" / "keys.json").read_text())["clients"]
        left = [c["name"] for c in keys if c["name"].startswith("bench-via-edge")]
        print("throw-away key's record: " + (f"LEFT BEHIND {left}" if left else "removed"))
    finally:
        for args in (["down", setup.PROFILE], ["edge", "down"]):
            subprocess.run(
                [*setup.CLI, "--root", str(root), *args], capture_output=True, timeout=300
            )
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
