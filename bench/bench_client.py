"""Is `composegen bench`'s client ever the bottleneck? Run it against bench/instant_server.py, or with
--paced against bench/paced_server.py (one event every 2 ms, each its own TCP write, as a real server).

    .venv/bin/python bench/bench_client.py [--concurrency 64] [--requests 3000] [--output-tokens 16] [--repeat 3]
    .venv/bin/python bench/bench_client.py --paced 2 --concurrency 16 --requests 320 --output-tokens 32

Starts the instant server in its own process on a free loopback port, runs composegen's own sweep
(composegen.bench.closed.run_bench, the same code `composegen bench` runs) and prints, per run, the
request rate reached and the client's own CPU per request (process CPU time during the level / requests),
then the best and the median. The goal (issue 18): >= 300 requests/s at concurrency 64 on a 2-core
machine; with --paced (issue 26): <= 0.05 ms of client CPU per streamed event (events per request:
the role chunk, one per output token, the usage chunk and [DONE]; the request's own cost is included).
Results: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from composegen.bench.closed import run_bench  # noqa: E402


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait(port: int) -> None:
    for _ in range(100):
        try:
            urllib.request.urlopen(
                f"http://127.0.0.1:{port}/tokenize", data=b"{}", timeout=1
            ).read()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit("the instant server did not answer")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--input-tokens", type=int, default=256)
    parser.add_argument("--output-tokens", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--paced", type=float, default=None, metavar="MS", help="paced server, MS between events"
    )
    args = parser.parse_args()
    port = _free_port()
    script = (
        ["paced_server.py", str(port), str(args.paced)]
        if args.paced is not None
        else ["instant_server.py", str(port)]
    )
    server = subprocess.Popen([sys.executable, str(REPO / "bench" / script[0]), *script[1:]])
    events = args.output_tokens + 3  # role chunk, one per token, usage chunk, [DONE]
    try:
        _wait(port)
        rates, cpus, per_event = [], [], []
        for n in range(args.repeat):
            result = run_bench(
                f"http://127.0.0.1:{port}",
                "instant",
                [args.concurrency],
                input_tokens=args.input_tokens,
                output_tokens=args.output_tokens,
                requests=args.requests,
                seed=n,
            )
            level = result.levels[0]
            rates.append(level.request_throughput)
            cpus.append(level.client_cpu_ms_per_request or 0.0)
            per_event.append(cpus[-1] / events)
            print(
                f"run {n + 1}: {level.completed} completed, {level.errors} errors, "
                f"{level.request_throughput:.1f} req/s, {level.output_throughput:,.0f} output tok/s, "
                f"client CPU {level.client_cpu_ms_per_request:.3f} ms/request (busy {level.client_cpu_share:.0%}), "
                f"median TTFT {level.median_ttft_ms} ms, {per_event[-1]:.4f} ms client CPU per event"
            )
        print(
            f"concurrency {args.concurrency}, {args.requests} requests x {args.output_tokens} streamed tokens, "
            f"{os.cpu_count()} CPUs: best {max(rates):.1f} req/s, median {statistics.median(rates):.1f} req/s; "
            f"client CPU median {statistics.median(cpus):.3f} ms/request, "
            f"{statistics.median(per_event):.4f} ms/event ({events} events per request)"
            + (f", server paced {args.paced:g} ms/event" if args.paced is not None else "")
        )
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    main()
