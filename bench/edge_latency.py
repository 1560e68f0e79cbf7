"""What does the edge add to what a client sees? (issue 38) Run by hand: bash bench/edge.sh [ROUNDS] [STREAMS]

On the real engine: a copy of examples/team-edge with one emulated stack behind the alias (max-num-seqs
high enough for STREAMS), the edge up in front of it and a throw-away key. Then:

1. C1, alternated: one streamed chat request (128 tokens) through the operator door (plain HTTP on the
   host's loopback: door → proxy → vLLM), then one through the public TLS listener with the key (proxy →
   gate → vLLM), ROUNDS times each, on one kept-alive connection per path. TTFT (request written → first
   content delta) and ITL (gaps between content deltas) p50 of each path and their difference.
2. STREAMS concurrent streams through the public listener (32 tokens each, one connection each): errors,
   tokens delivered, the gate's CPU per relayed token (its cgroup's usage_usec); then the same with one
   client that reads slowly (64 bytes every 50 ms on a small receive buffer): the others' ITL p50 beside it.

Every figure is measured on this machine against the EMULATED vLLM (its decode pace: 200 tokens/s).
Results: docs/benchmarks.md.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "team-edge"
CLI = [str(Path(sys.executable).with_name("composegen"))]
PROFILE = "edge-bench"

sys.path.insert(0, str(REPO))
from composegen.edge.image import local_tag  # noqa: E402


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _cli(root: Path, *args: str) -> str:
    proc = subprocess.run(
        [*CLI, "--root", str(root), *args], capture_output=True, text=True, timeout=900
    )
    if proc.returncode != 0:
        raise SystemExit(
            f"composegen {' '.join(args)}: exit {proc.returncode}\n{proc.stderr[-2000:]}"
        )
    return proc.stdout


@dataclass
class Project:
    root: Path
    edge: str
    port: int
    door: int
    streams: int

    def write(self) -> None:
        shutil.copytree(EXAMPLE / "profiles", self.root / "profiles")
        (self.root / "profiles" / f"{PROFILE}.yaml").write_text(
            "extends: 4096-131k\n"
            f"model: {{served_name: {PROFILE}-served}}\n"
            f"service: {{port: {{host: {self.door}}}, container_name: composegen-{self.edge}-bench}}\n"
            f"vllm: {{max-num-seqs: {max(self.streams, 8)}}}\n"
            'emulate: {env: {EMU_LOAD_SECONDS: "1"}}\n',
            encoding="utf-8",
        )
        tag = local_tag()  # this machine's caddy and CA bundle (the example pins the CI machine's)
        (self.root / "edge.yaml").write_text(
            f"name: {self.edge}\nlisten: {{bind: 127.0.0.1, port: {self.port}}}\n"
            "tls: {mode: internal, names: [localhost, 127.0.0.1]}\n"
            f"metrics: {{port: {_free_port()}}}\nstacks: [{PROFILE}]\naliases: {{ds4-flash: {PROFILE}}}\n"
            f"images: {{proxy: {tag}, gate: {tag}}}\n",
            encoding="utf-8",
        )


@dataclass
class Stream:
    ttft: float | None = None
    gaps: list[float] = field(default_factory=list)
    tokens: int = 0
    error: str | None = None
    elapsed: float = 0.0  # request written -> last chunk read


class Client:
    """One kept-alive HTTP/1.1 connection; a streamed chat request at a time, its chunked SSE read event by
    event (the timestamps are taken when an event's bytes arrive, as an SDK's iterator sees them)."""

    def __init__(
        self, port: int, tls: ssl.SSLContext | None, key: str | None, slow: bool = False
    ) -> None:
        self.port, self.tls, self.key, self.slow = port, tls, key, slow
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.slow:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        limit = 64 if self.slow else 2**16
        self.reader, self.writer = await asyncio.open_connection(
            sock=sock,
            ssl=self.tls,
            server_hostname="127.0.0.1" if self.tls else None,
            limit=max(limit, 1024),
        )

    async def stream(self, model: str, tokens: int) -> Stream:
        assert self.reader and self.writer
        body = json.dumps({"model": model, "stream": True, "max_tokens": tokens, "ignore_eos": True,
                           "messages": [{"role": "user", "content": "Say something long."}]}).encode()  # fmt: skip
        auth = f"Authorization: Bearer {self.key}\r\n" if self.key else ""
        head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()  # fmt: skip
        result = Stream()
        start = time.perf_counter()
        self.writer.write(head + body)
        await self.writer.drain()
        status = await self.reader.readline()
        if b" 200 " not in status:
            result.error = status.decode(errors="replace").strip()
            return result
        while (await self.reader.readline()) not in (b"\r\n", b""):
            pass
        last = None
        while True:
            size = int((await self.reader.readline()).strip() or b"0", 16)
            if self.slow:
                await asyncio.sleep(0.05)
            data = await self.reader.readexactly(size + 2)
            if size == 0:
                result.elapsed = time.perf_counter() - start
                return result
            now = time.perf_counter()
            for event in data.split(b"\n\n"):
                if b'"content":"' not in event or b'"content":""' in event:
                    continue
                result.tokens += 1
                if last is None:
                    result.ttft = now - start
                else:
                    result.gaps.append(now - last)
                last = now

    async def close(self) -> None:
        if self.writer:
            self.writer.close()


def _p50_ms(values: list[float]) -> float:
    return statistics.median(values) * 1000 if values else float("nan")


def _gate_cpu_us(edge: str) -> int:
    """The gate container's CPU time: cgroup v2's cpu.stat, else v1's cpuacct.usage (nanoseconds)."""
    script = "cat /sys/fs/cgroup/cpu.stat 2>/dev/null || echo ns $(cat /sys/fs/cgroup/cpuacct/cpuacct.usage)"
    out = subprocess.run(["docker", "exec", f"composegen-{edge}-gate-1", "sh", "-c", script],
                         capture_output=True, text=True, timeout=60).stdout  # fmt: skip
    if found := re.search(r"^usage_usec (\d+)", out, re.M):
        return int(found.group(1))
    if found := re.search(r"^ns (\d+)", out, re.M):
        return int(found.group(1)) // 1000
    raise SystemExit(f"the gate's cgroup has no CPU usage: {out[:200]!r}")


async def alternated(project: Project, tls: ssl.SSLContext, key: str, rounds: int) -> None:
    door, edge = Client(project.door, None, None), Client(project.port, tls, key)
    await door.open()
    await edge.open()
    runs: dict[str, list[Stream]] = {"door": [], "edge": []}
    for n in range(rounds + 2):  # the first two rounds warm both paths up and are not counted
        for name, client, model in (
            ("door", door, f"{PROFILE}-served"),
            ("edge", edge, "ds4-flash"),
        ):
            got = await client.stream(model, 128)
            if got.error or got.tokens != 128:
                raise SystemExit(f"{name}: {got.error or f'{got.tokens} of 128 tokens'}")
            if n >= 2:
                runs[name].append(got)
    await door.close()
    await edge.close()
    figures = {}
    for name, streams in runs.items():
        ttft = _p50_ms([s.ttft for s in streams if s.ttft is not None])
        itl = _p50_ms([g for s in streams for g in s.gaps])
        figures[name] = (ttft, itl)
        print(
            f"C1 {name}: {len(streams)} requests x 128 tokens, TTFT p50 {ttft:.2f} ms, ITL p50 {itl:.3f} ms"
        )
    (dt, di), (et, ei) = figures["door"], figures["edge"]
    print(
        f"C1 added by the edge (TLS + gate) against the door: TTFT p50 {et - dt:+.2f} ms, ITL p50 {ei - di:+.3f} ms"
    )


async def concurrent(
    project: Project, tls: ssl.SSLContext, key: str, streams: int, slow: bool
) -> None:
    clients = [Client(project.port, tls, key, slow=slow and i == 0) for i in range(streams)]
    await asyncio.gather(*(c.open() for c in clients))
    before, start = _gate_cpu_us(project.edge), time.perf_counter()
    results = await asyncio.gather(
        *(c.stream("ds4-flash", 32) for c in clients), return_exceptions=True
    )
    wall, cpu_us = time.perf_counter() - start, _gate_cpu_us(project.edge) - before
    await asyncio.gather(*(c.close() for c in clients))
    done = [r for r in results if isinstance(r, Stream)]
    errors = len(results) - len(done) + sum(1 for r in done if r.error)
    tokens = sum(r.tokens for r in done)
    others = done[1:] if slow else done
    # events arrive coalesced under load
    itl = _p50_ms([sum(r.gaps) / len(r.gaps) for r in others if r.gaps])
    slowest = max((r.elapsed for r in others), default=0)
    print(
        f"{streams} streams{' (one reading slowly)' if slow else ''}: {errors} errors, {tokens} of {streams * 32} "
        f"tokens in {wall:.2f} s; others' mean ITL p50 {itl:.2f} ms, "
        f"TTFT p50 {_p50_ms([r.ttft for r in others if r.ttft]):.1f} ms, "
        f"slowest of them done after {slowest:.2f} s; gate CPU {cpu_us / 1000:.0f} ms, "
        f"{cpu_us / max(tokens, 1):.1f} µs per relayed token"
    )


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    streams = int(sys.argv[2]) if len(sys.argv) > 2 else 256
    root = Path(tempfile.mkdtemp(prefix="edge-bench-"))
    project = Project(root, f"edgebench{os.getpid()}", _free_port(), _free_port(), streams)
    project.write()
    try:
        _cli(root, "render")
        _cli(root, "edge", "up")
        _cli(root, "up", PROFILE, "--emulate")
        key = re.search(r"\b(cgk_[A-Za-z0-9_-]+)", _cli(root, "edge", "keys", "add", "bench"))
        if not key:
            raise SystemExit("keys add printed no key")
        tls = ssl.create_default_context(cadata=_cli(root, "edge", "ca"))
        print(
            f"load before: {Path('/proc/loadavg').read_text().split()[:3]}, {os.cpu_count()} CPUs, EMULATED vLLM"
        )
        asyncio.run(alternated(project, tls, key.group(1), rounds))
        asyncio.run(concurrent(project, tls, key.group(1), streams, slow=False))
        asyncio.run(concurrent(project, tls, key.group(1), streams, slow=True))
        print(f"load after: {Path('/proc/loadavg').read_text().split()[:3]}")
    finally:
        subprocess.run(
            [*CLI, "--root", str(root), "down", PROFILE], capture_output=True, timeout=300
        )
        subprocess.run(
            [*CLI, "--root", str(root), "edge", "down"], capture_output=True, timeout=300
        )
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
