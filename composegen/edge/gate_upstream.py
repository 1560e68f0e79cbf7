"""The gatekeeper's upstream side (a part of gatekeeper.py; stdlib only): the watch on clients and bodies,
bounded name lookups, kept-alive connections to the stacks, the body budget."""

from __future__ import annotations

import contextlib
import http.client
import json
import select
import selectors
import socket
import threading
import time
from datetime import UTC, datetime

from composegen.edge.gate_rules import (
    CONNECT_TIMEOUT_S,
    IDLE_UPSTREAMS,
    LOOKUPS,
    RESOLVE_WAIT_DOWN_S,
    RESOLVE_WAIT_S,
    SLEEP_PROBE_S,
    UPSTREAM_TIMEOUT_S,
    WATCH_S,
    _stamp,
    utc,
)


class Watch:
    """One thread for every connection: cuts a body read past its deadline, and ends the upstream
    request of a client that hung up (its socket reads closed): vLLM stops generating for nobody."""

    def __init__(self) -> None:
        self._selector = selectors.DefaultSelector()
        self._deadlines: dict[socket.socket, float] = {}
        self._lock = threading.Lock()
        threading.Thread(target=self._run, name="watch", daemon=True).start()

    def deadline(self, sock: socket.socket, seconds: float | None) -> None:
        with self._lock:
            if seconds is None:
                self._deadlines.pop(sock, None)
            else:
                self._deadlines[sock] = time.monotonic() + seconds

    def client(self, sock: socket.socket, upstream: socket.socket | None) -> None:
        """Watch SOCK while UPSTREAM serves it (None: stop watching)."""
        with self._lock:
            try:
                if upstream is None:
                    self._selector.unregister(sock)
                else:
                    self._selector.register(sock, selectors.EVENT_READ, upstream)
            except (KeyError, ValueError, OSError):
                pass

    def _run(self) -> None:
        while True:
            try:
                ready = self._selector.select(WATCH_S)
            # a socket closed while registered: the next round sees the rest
            except (OSError, ValueError):
                ready = []
                time.sleep(WATCH_S)
            for key, _ in ready:
                self._readable(key.fileobj, key.data)  # type: ignore[arg-type]
            now = time.monotonic()
            with self._lock:
                overdue = [sock for sock, at in self._deadlines.items() if at <= now]
                for sock in overdue:
                    del self._deadlines[sock]
            for sock in overdue:
                # its reads end; our answer (408) can still be written
                _shutdown(sock, socket.SHUT_RD)

    def _readable(self, sock: socket.socket, upstream: socket.socket) -> None:
        gone = _gone(sock)
        # gone, or it sent more (a pipelined request): either way, done watching
        self.client(sock, None)
        if gone:
            _shutdown(upstream)


def _shutdown(sock: socket.socket, how: int = socket.SHUT_RDWR) -> None:
    with contextlib.suppress(OSError):  # already closed: nothing left to end
        sock.shutdown(how)


class ClientGone(Exception):
    """The client hung up while the stack worked on its request: nobody is left to answer."""


def _gone(sock: socket.socket) -> bool:
    """SOCK's peer closed it (never blocks: a socket with a timeout waits in recv, even with
    MSG_DONTWAIT)."""
    try:
        if not select.select([sock], [], [], 0)[0]:
            return False
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


class EngineAsleep(Exception):
    """A standby engine answered that it sleeps (its 503, or /is_sleeping while the request waited)."""


def check_sleep(conn: http.client.HTTPConnection, asleep: threading.Event) -> None:
    """Ask the standby engine behind CONN, which has not answered yet, whether it sleeps (on a
    connection of its own, to the address CONN reached); if so, end the request."""
    sock = conn.sock
    if sock is None:
        return
    host, port = sock.getpeername()[:2]
    probe = http.client.HTTPConnection(host, port, timeout=SLEEP_PROBE_S)
    try:
        probe.request("GET", "/is_sleeping", headers={"Host": f"{conn.host}:{conn.port}"})
        doc = json.loads(probe.getresponse().read(4096))
    except (OSError, http.client.HTTPException, ValueError, RecursionError):
        return
    finally:
        probe.close()
    if isinstance(doc, dict) and doc.get("is_sleeping") is True:
        asleep.set()
        _shutdown(sock)


class NotResolved(OSError):
    """A stack's name did not resolve within the wait (or at all): the stack is down."""


class Lookups:
    """Name lookups that never keep a client waiting past a bound: each runs in its own thread (the
    resolver call cannot be cut short), at most LOOKUPS at once."""

    def __init__(self) -> None:
        self._slots = threading.BoundedSemaphore(LOOKUPS)

    def address(self, host: str, port: int, wait: float) -> tuple[str, int]:
        if not self._slots.acquire(blocking=False):
            raise NotResolved(f"{host}: lookups busy")
        found: list[tuple[str, int] | BaseException] = []
        done = threading.Event()

        def look() -> None:
            try:
                infos = socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_STREAM)
                found.append((str(infos[0][4][0]), int(infos[0][4][1])))
            except (OSError, IndexError) as exc:
                found.append(exc)
            finally:
                self._slots.release()
                done.set()

        threading.Thread(target=look, name="lookup", daemon=True).start()
        if not done.wait(wait) or not isinstance(found[0], tuple):
            raise NotResolved(host)
        return found[0]


class StackConnection(http.client.HTTPConnection):
    """A connection whose name lookup and connect are bounded (the answer itself may take
    UPSTREAM_TIMEOUT_S: a long generation)."""

    def __init__(self, host: str, port: int, lookups: Lookups, wait: float) -> None:
        super().__init__(host, port, timeout=UPSTREAM_TIMEOUT_S)
        self._lookups, self._wait = lookups, wait

    def connect(self) -> None:
        address = self._lookups.address(self.host, self.port, self._wait)
        self.sock = socket.create_connection(address, CONNECT_TIMEOUT_S)
        self.sock.settimeout(UPSTREAM_TIMEOUT_S)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class Upstreams:
    """Kept-alive connections to the stacks, reused across requests (no connect per request), and
    since when each unreachable stack has been found so."""

    def __init__(self) -> None:
        self._idle: dict[tuple[str, int], list[http.client.HTTPConnection]] = {}
        self._down: dict[tuple[str, int], datetime] = {}
        self._answered: dict[tuple[str, int], datetime] = {}
        self._lock = threading.Lock()
        self._lookups = Lookups()

    def take(self, host: str, port: int) -> tuple[http.client.HTTPConnection, bool]:
        with self._lock:
            idle = self._idle.get((host, port))
            if idle:
                return idle.pop(), True
            wait = RESOLVE_WAIT_DOWN_S if (host, port) in self._down else RESOLVE_WAIT_S
        return StackConnection(host, port, self._lookups, wait), False

    def failed(self, host: str, port: int, downed: object = None) -> datetime:
        """The stack at HOST:PORT cannot be reached: since when. DOWNED is when composegen downed it
        (routes.json), believed unless the stack answered since; else the first failure in a row."""
        at = _stamp(downed)
        with self._lock:
            first = self._down.setdefault((host, port), datetime.now(UTC))
            last_answer = self._answered.get((host, port))
        return at if at is not None and (last_answer is None or at > last_answer) else first

    def answered(self, host: str, port: int) -> None:
        with self._lock:
            self._down.pop((host, port), None)
            self._answered[(host, port)] = datetime.now(UTC)

    def drop(self, host: str, port: int) -> None:
        """Close every idle connection to HOST:PORT: one turned out dead, so the stack behind it was
        replaced (a restart, a recovery) and the others are as old."""
        with self._lock:
            idle = self._idle.pop((host, port), [])
        for conn in idle:
            conn.close()

    def give_back(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            idle = self._idle.setdefault((conn.host, conn.port), [])
            if len(idle) < IDLE_UPSTREAMS:
                idle.append(conn)
                return
        conn.close()


class Budget:
    """Bytes of request bodies held at once; a request that would pass it is told to retry."""

    def __init__(self, limit: int) -> None:
        self.limit, self.used = limit, 0
        self._lock = threading.Lock()

    def take(self, size: int) -> bool:
        with self._lock:
            if self.used + size > self.limit:
                return False
            self.used += size
            return True

    def give_back(self, size: int) -> None:
        with self._lock:
            self.used -= size


def _down_stage(profile: str, since: datetime, exc: BaseException) -> str:
    """A stage clients may read: what happened in our words, never a Python exception name."""
    at = utc(since)
    if isinstance(exc, (NotResolved, socket.gaierror)):
        return f"{profile} is down since {at} (its name does not resolve)"
    return f"{profile} is not answering since {at} ({_reason(exc)})"


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused: the engine is not listening"
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    return "the connection failed"
