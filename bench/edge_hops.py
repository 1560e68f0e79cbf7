"""Where the edge's TTFT goes, hop by hop (issue 48 item 4). Run by hand: .venv/bin/python bench/edge_hops.py [ROUNDS]

No Docker: the EMULATED vLLM as a local process, the gatekeeper as the edge runs it (the joined file,
`python3 -I`), this machine's caddy (Debian's
2.6.2, the binary the edge image ships) with the proxy's hop as render writes it (`gate_proxy`) and, for
comparison, with `flush_interval -1` (what the edge rendered before issue 48). Streamed chat requests of 4
tokens alternated over five paths, one kept-alive plain-HTTP connection each (no TLS: that is the same on
every path through the edge and is measured by bench/edge.sh):

  direct         client → vLLM
  gate           client → gate → vLLM
  caddy          client → caddy → vLLM                      (what a bare reverse proxy costs)
  caddy+gate     client → caddy → gate → vLLM               (the edge's hops as rendered)
  caddy(-1)+gate client → caddy (flush_interval -1) → gate → vLLM

TTFT = request written → first content delta read. Prints p50 and p90 per path and each path's p50 over
direct.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from composegen.edge import render  # noqa: E402
from tests.support.emulator_proc import EmulatorProc  # noqa: E402

KEY = "cgk_hops"


def _caddy(tmp: Path, name: str, upstream: str, flush: bool) -> tuple[subprocess.Popen, int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    hop = (
        [f"\treverse_proxy {upstream} {{", "\t\tflush_interval -1", "\t}"]
        if flush
        else render.gate_proxy(upstream, "\t")
    )
    lines = [
        "{",
        "\tadmin off",
        "\tauto_https off",
        render._timeouts(),
        "}",
        f"http://:{port} {{",
        "\tbind 127.0.0.1",
        *hop,
        "}",
    ]
    (tmp / f"{name}.Caddyfile").write_text("\n".join(lines) + "\n")
    proc = subprocess.Popen(
        ["caddy", "run", "--config", str(tmp / f"{name}.Caddyfile"), "--adapter", "caddyfile"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(200):
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return proc, port
        time.sleep(0.05)
    raise SystemExit(f"caddy {name} did not start")


def _ttft(sock: socket.socket, model: str) -> float:
    body = json.dumps(
        {
            "model": model,
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 4,
            "stream": True,
        }
    ).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer {KEY}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    started = time.perf_counter()
    sock.sendall(head + body)
    data, first = b"", None
    while not data.endswith(b"0\r\n\r\n"):
        piece = sock.recv(65536)
        if not piece:
            raise SystemExit("closed mid-answer")
        data += piece
        if first is None and b'"content"' in data:
            first = time.perf_counter() - started
    return (first or 0.0) * 1000


def main() -> int:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    tmp = Path(tempfile.mkdtemp(prefix="edge-hops-"))
    with EmulatorProc.start(tmp) as emu:
        state = tmp / "state"
        state.mkdir()
        (state / "keys.json").write_text(
            json.dumps(
                {"clients": [{"name": "b", "sha256": hashlib.sha256(KEY.encode()).hexdigest()}]}
            )
        )
        route = {"profile": "p", "upstream": f"127.0.0.1:{emu.port}", "served_name": emu.model}
        (state / "routes.json").write_text(json.dumps({"retry_after": 5, "aliases": {"a": route}}))
        (tmp / "gatekeeper.py").write_text(render.gatekeeper_text())  # the one file the edge runs
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            gate_port = s.getsockname()[1]
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-I",
                    str(tmp / "gatekeeper.py"),
                    "--state",
                    str(state),
                    "--port",
                    str(gate_port),
                ],
                stdout=subprocess.DEVNULL,
            )
        ]
        for _ in range(200):
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", gate_port), 0.2),
            ):
                break
            time.sleep(0.05)
        paths = {"direct": (emu.port, emu.model), "gate": (gate_port, "a")}
        for name, upstream, flush, model in (
            ("caddy", f"127.0.0.1:{emu.port}", False, emu.model),
            ("caddy+gate", f"127.0.0.1:{gate_port}", False, "a"),
            ("caddy(-1)+gate", f"127.0.0.1:{gate_port}", True, "a"),
        ):
            proc, port = _caddy(
                tmp, name.replace("+", "_").replace("(-1)", "_flush"), upstream, flush
            )
            procs.append(proc)
            paths[name] = (port, model)
        socks = {
            n: socket.create_connection(("127.0.0.1", p), timeout=30) for n, (p, _) in paths.items()
        }
        for n in paths:
            socks[n].setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        took: dict[str, list[float]] = {n: [] for n in paths}
        for i in range(rounds + 3):
            for n, (_, model) in paths.items():
                ms = _ttft(socks[n], model)
                if i >= 3:  # warm-up
                    took[n].append(ms)
        for proc in procs:
            proc.terminate()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"EMULATED vLLM, {rounds} streamed requests per path, alternated; load {load}; TTFT ms")
    base = statistics.median(took["direct"])
    for n, values in took.items():
        p50, p90 = statistics.median(values), statistics.quantiles(values, n=10)[-1]
        print(f"  {n:15} p50 {p50:7.3f}  p90 {p90:7.3f}  over direct {p50 - base:+.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
