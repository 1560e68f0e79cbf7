"""Multi-node behaviour of the emulator: vLLM's `--nnodes N --node-rank R --master-addr A
--master-port P [--headless]` launch (mp backend, tensor parallel across nodes), with a tiny TCP
join protocol standing in for torch's TCPStore rendezvous and the NCCL links between the nodes.

Protocol: one JSON object per line (UTF-8) on a TCP connection from each worker node to A:P.
  worker → head   {"op": "join", "rank": R, "nnodes": N, "model": M, "world_size": W}
  head → worker   {"op": "welcome"}, or {"op": "reject", "reason": "…"} and the connection is closed
  head → workers  {"op": "start"} once all N−1 workers joined: every node loads its shard
  both ways       {"op": "ping"} every EMU_HEARTBEAT_S (0.5 s); EOF, or silence for EMU_PEER_TIMEOUT_S (5 s),
                  means the peer is gone
  head → workers  {"op": "shutdown"} when the head stops cleanly (SIGTERM): the workers exit 0

Failure behaviour, like vLLM: the head listens before anything else (a port in use exits 1 with
torch's EADDRINUSE message), logs while it waits and opens its API only after every rank joined; no
full group within EMU_JOIN_TIMEOUT_S (600 s) exits 1. A worker lost after joining makes the head log
the worker's death and exit 1. A worker retries the master until EMU_JOIN_TIMEOUT_S, and exits 1
when the head goes away without saying "shutdown". Per-rank memory numbers do not change: TP simply
spans the nodes."""

from __future__ import annotations

import contextlib
import functools
import json
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import BinaryIO

Logger = Callable[..., None]  # runner.Log: (level, source, message, proc="APIServer")


class ClusterError(Exception):
    """The node cannot take part (rejected, timed out, port in use); a vLLM/torch-shaped message."""


class PeerLost(BaseException):
    """Raised in the head's main thread (via a signal) when a joined worker is gone."""


@dataclass(frozen=True)
class Timing:
    heartbeat_s: float = 0.5
    peer_timeout_s: float = 5.0
    join_timeout_s: float = 600.0

    @classmethod
    def from_env(
        cls, env: Mapping[str, str], number: Callable[[Mapping[str, str], str, float], float]
    ) -> Timing:
        return cls(
            number(env, "EMU_HEARTBEAT_S", cls.heartbeat_s),
            number(env, "EMU_PEER_TIMEOUT_S", cls.peer_timeout_s),
            number(env, "EMU_JOIN_TIMEOUT_S", cls.join_timeout_s),
        )


@dataclass(frozen=True)
class Launch:
    """The multi-node flags of one node, checked the way the emulator needs them."""

    nnodes: int
    rank: int
    addr: str
    port: int
    headless: bool
    world_size: int
    model: str

    @property
    def local_ranks(self) -> list[int]:
        return ranks_of(self.rank, self.world_size, self.nnodes)

    @classmethod
    def from_values(cls, values: dict) -> Launch | None:
        """None for one node; ValueError (usage) for a combination vLLM's mp launcher refuses."""
        nnodes, rank = int(values.get("nnodes") or 1), int(values.get("node_rank") or 0)
        headless = bool(values.get("headless"))
        if nnodes <= 1 and not headless:
            return None
        if nnodes <= 1:
            raise ValueError(
                "--headless without --nnodes > 1 (data-parallel headless mode is not emulated)"
            )
        if not 0 <= rank < nnodes:
            raise ValueError(f"--node-rank {rank} must be in [0, {nnodes})")
        if rank > 0 and not headless:
            raise ValueError(f"node rank {rank} runs no API server: it needs --headless")
        if rank == 0 and headless:
            raise ValueError("node rank 0 is the head; it cannot be --headless")
        tp, pp = (int(values.get(f"{k}_parallel_size") or 1) for k in ("tensor", "pipeline"))
        world = tp * pp
        if world % nnodes:
            raise ValueError(
                f"world size {world} (tensor × pipeline parallel) does not split over {nnodes} nodes"
            )
        addr, port = (
            values.get("master_addr") or "127.0.0.1",
            int(values.get("master_port") or 29501),
        )
        return cls(nnodes, rank, addr, port, headless, world, values["model"])


def ranks_of(node_rank: int, world_size: int, nnodes: int) -> list[int]:
    """The global ranks a node runs (vLLM fills the nodes in order: node 0 has ranks 0..k-1)."""
    per_node = max(1, world_size // nnodes)
    return list(range(node_rank * per_node, (node_rank + 1) * per_node))


class _Link:
    """One peer connection: reads JSON lines, sends a heartbeat, reports the peer's loss once."""

    def __init__(
        self,
        sock: socket.socket,
        timing: Timing,
        on_message: Callable[[dict], None],
        on_lost: Callable[[str], None],
        reader: BinaryIO | None = None,
    ) -> None:
        self.sock, self.timing = sock, timing
        self.on_message, self.on_lost = on_message, on_lost
        self.reader = reader or sock.makefile("rb")
        self.peer = _peer(sock)
        self.closed = False
        self._send_lock = threading.Lock()

    def start(self) -> None:
        self.sock.settimeout(self.timing.peer_timeout_s)
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._ping, daemon=True).start()

    def send(self, message: dict) -> bool:
        try:
            with self._send_lock:
                _send(self.sock, message)
            return True
        except OSError:
            return False

    def close(self) -> None:
        self.closed = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()

    def _read(self) -> None:
        reason = "connection closed"
        try:
            for raw in self.reader:
                message = json.loads(raw)
                if message.get("op") != "ping":
                    self.on_message(message)
        except TimeoutError:
            reason = f"no heartbeat for {self.timing.peer_timeout_s:g} s"
        except (OSError, ValueError) as exc:
            reason = type(exc).__name__
        if not self.closed:
            self.on_lost(reason)

    def _ping(self) -> None:
        while not self.closed and self.send({"op": "ping"}):
            time.sleep(self.timing.heartbeat_s)


def _info(log: Logger, line: int, message: str) -> None:
    log("INFO", f"multiproc_executor.py:{line}", message)


def _peer(sock: socket.socket) -> str:
    host, port = sock.getpeername()[:2]
    return f"{host}:{port}"


def _send(sock: socket.socket, message: dict) -> None:
    sock.sendall(json.dumps(message).encode() + b"\n")


def _read_line(sock: socket.socket, reader: BinaryIO, timeout: float) -> dict:
    sock.settimeout(timeout)
    line = reader.readline()
    if not line:
        raise ConnectionError("closed before a message arrived")
    return json.loads(line)


class Head:
    """Node rank 0: listens on the master address, admits the workers, then watches them."""

    def __init__(self, launch: Launch, timing: Timing, log: Logger):
        self.launch, self.timing, self.log = launch, timing, log
        self.links: dict[int, _Link] = {}
        self.lost: tuple[int, str, str] | None = None  # (rank, peer, reason)
        self.on_lost: Callable[[], None] = lambda: None
        self._lock = threading.Lock()
        self._stopping = False
        self._server: socket.socket | None = None

    def listen(self) -> None:
        a = self.launch
        try:
            self._server = socket.create_server(
                (a.addr, a.port), family=socket.AF_INET6 if ":" in a.addr else socket.AF_INET
            )
        except OSError as exc:
            raise ClusterError(
                f"torch.distributed.DistNetworkError: The server socket has failed to listen on any local "
                f"network address. port: {a.port}, useIPv6: {':' in a.addr}, code: -{exc.errno}, "
                f"message: {exc.strerror}"
            ) from None
        head = f"Multi-node launch: node rank 0 of {a.nnodes} (head), world size {a.world_size}"
        wait = f"master listening on {a.addr}:{a.port}, waiting for {a.nnodes - 1} remote node(s)"
        _info(self.log, 131, f"{head}; {wait}")
        threading.Thread(target=self._accept, daemon=True).start()

    def gather(self) -> None:
        """Block until every worker joined; ClusterError after EMU_JOIN_TIMEOUT_S."""
        a, started, last_log = self.launch, time.monotonic(), time.monotonic()
        while len(self.links) < a.nnodes - 1:
            now = time.monotonic()
            if now - started > self.timing.join_timeout_s:
                raise ClusterError(
                    f"torch.distributed.DistStoreError: Timed out after {self.timing.join_timeout_s:g} seconds "
                    f"waiting for clients. {len(self.links) + 1}/{a.nnodes} clients joined."
                )
            if now - last_log >= 5:
                last_log = now
                missing = sorted(set(range(1, a.nnodes)) - set(self.links))
                ready = f"{len(self.links) + 1}/{a.nnodes} nodes ready"
                text = f"Waiting for remote nodes to join ({ready}); missing node rank(s) {missing}"
                _info(self.log, 140, text)
            time.sleep(0.05)
        _info(self.log, 152, f"All {a.nnodes} nodes joined; world size {a.world_size}")
        for link in list(self.links.values()):
            link.send({"op": "start"})

    def close(self, clean: bool) -> None:
        with self._lock:
            self._stopping = True
        for link in list(self.links.values()):
            if clean:
                link.send({"op": "shutdown"})
            link.close()
        if self._server is not None:
            self._server.close()

    def _accept(self) -> None:
        server = self._server
        assert server is not None  # listen() made it before starting this thread
        while True:
            try:
                sock, _ = server.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._admit, args=(sock,), daemon=True).start()

    def _admit(self, sock: socket.socket) -> None:
        reader, peer = sock.makefile("rb"), _peer(sock)
        try:
            hello = _read_line(sock, reader, self.timing.peer_timeout_s)
        except (OSError, ValueError):
            sock.close()
            return
        given = hello.get("rank")
        # _refusal below rejects a missing or unknown rank
        rank = given if isinstance(given, int) else -1
        with self._lock:
            reason = None if self._stopping else self._refusal(hello)
            if reason is None and not self._stopping:
                # a head ignores what a joined worker sends besides heartbeats
                lose = functools.partial(self._lose, rank, peer)
                link = _Link(sock, self.timing, lambda message: None, lose, reader)
                # welcome before the worker counts as joined: gather's "start" must not overtake it
                link.send({"op": "welcome"})
                self.links[rank] = link
        if reason is not None or self._stopping:
            rejected = f"Rejected a node from {peer}: {reason or 'shutting down'}"
            self.log("WARNING", "multiproc_executor.py:170", rejected)
            with contextlib.suppress(OSError):
                _send(sock, {"op": "reject", "reason": reason or "the head is shutting down"})
            sock.close()
            return
        link.start()
        names = ", ".join(
            f"Worker_TP{r}" for r in ranks_of(rank, self.launch.world_size, self.launch.nnodes)
        )
        _info(self.log, 178, f"Node rank {rank} joined from {peer} ({names})")

    def _refusal(self, hello: dict) -> str | None:
        a, rank = self.launch, hello.get("rank")
        if hello.get("op") != "join":
            return f"expected a join message, got {hello.get('op')!r}"
        if hello.get("nnodes") != a.nnodes:
            return (
                f"--nnodes mismatch: the head has {a.nnodes}, the node says {hello.get('nnodes')}"
            )
        if not isinstance(rank, int) or not 1 <= rank < a.nnodes:
            return f"node rank {rank!r} is not a worker rank of {a.nnodes} nodes"
        if rank in self.links:
            return f"node rank {rank} already joined"
        if hello.get("model") != a.model or hello.get("world_size") != a.world_size:
            return (
                f"configuration mismatch: the head serves {a.model} with world size {a.world_size}, the node "
                f"{hello.get('model')} with {hello.get('world_size')}"
            )
        return None

    def _lose(self, rank: int, peer: str, reason: str) -> None:
        with self._lock:
            if self._stopping or self.lost is not None:
                return
            self.lost = (rank, peer, reason)
        self.on_lost()


class Member:
    """A headless worker node: joins the head, loads on "start", serves until the head ends."""

    def __init__(self, launch: Launch, timing: Timing, log: Logger):
        self.launch, self.timing, self.log = launch, timing, log
        self.link: _Link | None = None
        self.started = threading.Event()
        self.ended = threading.Event()
        self.clean_end = False
        self.lost_reason = ""

    def join(self) -> None:
        a, deadline = self.launch, time.monotonic() + self.timing.join_timeout_s
        at = f"local ranks {a.local_ranks}; connecting to the master at {a.addr}:{a.port}"
        _info(self.log, 211, f"Headless mode: node rank {a.rank} of {a.nnodes}, {at}")
        sock = self._connect(deadline)
        reader = sock.makefile("rb")
        hello = {"rank": a.rank, "nnodes": a.nnodes, "model": a.model, "world_size": a.world_size}
        try:
            _send(sock, {"op": "join", **hello})
            reply = _read_line(sock, reader, self.timing.peer_timeout_s)
        except (OSError, ValueError) as exc:
            sock.close()
            raise ClusterError(
                f"RuntimeError: joining the master at {a.addr}:{a.port} failed: {exc}"
            ) from None
        if reply.get("op") != "welcome":
            sock.close()
            raise ClusterError(
                f"RuntimeError: the master at {a.addr}:{a.port} rejected node rank {a.rank}: {reply.get('reason')}"
            )
        self.link = _Link(sock, self.timing, self._message, self._lost, reader)
        self.link.start()
        _info(self.log, 236, f"Joined the master at {a.addr}:{a.port} as node rank {a.rank}")

    def _connect(self, deadline: float) -> socket.socket:
        """The master's socket, retried until the join deadline (the head may start later)."""
        a, last_log = self.launch, 0.0
        while True:
            try:
                return socket.create_connection((a.addr, a.port), timeout=2)
            except OSError as exc:
                if time.monotonic() > deadline:
                    raise ClusterError(
                        f"torch.distributed.DistStoreError: Timed out after {self.timing.join_timeout_s:g} "
                        f"seconds connecting to the master at {a.addr}:{a.port} ({exc.strerror or exc})"
                    ) from None
                if time.monotonic() - last_log >= 5:
                    last_log = time.monotonic()
                    retry = f"Waiting for the master at {a.addr}:{a.port} ({exc.strerror or exc})"
                    _info(self.log, 219, f"{retry}; retrying")
                time.sleep(0.2)

    def wait(self, event: threading.Event) -> bool:
        """Wait for `event` (True) unless the head goes first (False). Signals still get through."""
        while not event.is_set() and not self.ended.is_set():
            event.wait(0.2)
        return event.is_set()

    def close(self) -> None:
        if self.link is not None:
            self.link.close()

    def _message(self, message: dict) -> None:
        if message.get("op") == "start":
            self.started.set()
        elif message.get("op") == "shutdown":
            self.clean_end = True
            self.ended.set()

    def _lost(self, reason: str) -> None:
        if not self.ended.is_set():
            self.lost_reason = reason
            self.ended.set()
