"""vLLM's sleep mode on a running stack, reached only over the stack's private network (its dev routes
answer anything on the stack's networks; the edge, the door and the published ports never pass them).
On a local engine this machine is the gateway of the container's bridge networks: composegen calls the
engine's own listener there (a few ms) once a probe showed the connection leaves from that gateway
address; else (a remote engine, rootless docker, a VM between) from inside the container (`docker
exec` of a small python3 client against 127.0.0.1:PORT: ~0.1-0.2 s per call).

Sleep: POST /sleep?level=L&mode=M. Wake: level 1 one POST /wake_up; level 2 wake_up?tags=weights,
POST /collective_rpc {"method": "reload_weights"}, wake_up?tags=kv_cache (the order recorded on the
H200: tests/data/real-0.26.0-h200-sleep/). What composegen did is kept in
.composegen/standby/NAME.json (level, since, its own residue: `_residue`)."""

from __future__ import annotations

import dataclasses
import json
import socket
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from signal import SIGHUP, SIGINT, SIGTERM

from composegen import interrupts, privatestate
from composegen.errors import ComposegenError, EngineError
from composegen.profiles import resolve
from composegen.profiles.resolved import Resolved
from composegen.project import Project, compose_project
from composegen.sizing import ledger as gpuledger
from composegen.stack import engine
from composegen.stack.facts import ContainerFacts
from composegen.stack.up import startup_check
from composegen.vllm import stages
from composegen.wire.http import Peer, PeerUnreachable, WireError

MAX_ANSWER = 64 << 10
KEPT = ("residue_gib", "residue_from")  # what the record keeps once the engine is awake
DEFAULT_UTILIZATION = 0.92  # vLLM's --gpu-memory-utilization default
CONNECT_S = 0.5  # a bridge address that does not connect in this long is not reachable from here
_reachable: dict[tuple[str, str, int], bool] = {}  # (container id, address, port): connects
# stdlib only, -I: nothing from the image's site-packages or the working directory runs
CLIENT = (
    "import sys, urllib.request, urllib.error\n"
    "url, method, body, timeout = sys.argv[1], sys.argv[2], sys.argv[3].encode() or None, float(sys.argv[4])\n"
    "req = urllib.request.Request(url, data=body, method=method, headers={'Content-Type': 'application/json'})\n"
    "try:\n"
    "    r = urllib.request.urlopen(req, timeout=timeout)\n"
    "except urllib.error.HTTPError as e:\n"
    "    r = e\n"
    "print(r.status if hasattr(r, 'status') else r.code)\n"
    "sys.stdout.write(r.read(65536).decode('utf-8', 'replace'))\n"
)


@dataclass
class Asleep:
    level: int
    # when composegen put it to sleep (privatestate.stamp); None: not by composegen
    since: str | None
    residue_gib: float | None  # GPU memory the sleeping engine still holds (its own share)
    residue_from: str | None = None  # how: the GPU-wide line minus what the others hold


@dataclass(frozen=True)
class _DevCall:
    """One request to a dev-mode route, whichever way it goes (the private network or an exec)."""

    method: str
    path: str
    body: Mapping[str, object] | None = None
    timeout: float = 120

    @property
    def payload(self) -> str | None:
        """The JSON body; a POST without one sends `{}`, as vLLM's routes expect."""
        if self.body is not None:
            return json.dumps(self.body)
        return "{}" if self.method == "POST" else None


def _call(ctr: ContainerFacts, port: int, call: _DevCall) -> tuple[int, str]:
    peer = _private_peer(ctr, port)
    if peer is None:
        return _exec_call(ctr, port, call)
    data = call.payload.encode() if call.payload is not None else None
    try:
        reply = peer.fetch(call.method, call.path, data, deadline_s=call.timeout, cap=MAX_ANSWER)
    except PeerUnreachable as exc:
        # the address worked before. Probed again, it no longer connects (or not from this host's
        # bridge): the cached True is dropped and the exec carries the call. It still connects:
        # the request may have reached the engine, so it is not sent twice
        net = next(n for n in ctr.addresses if n.address == peer.host)
        if not _on_its_bridge(net.address, net.gateway, port):
            _reachable[(ctr.id, net.address, port)] = False
            return _exec_call(ctr, port, call)
        raise _failed(ctr, call, peer, exc) from None
    except WireError as exc:
        raise _failed(ctr, call, peer, exc) from None
    return reply.status, reply.body.decode("utf-8", "replace")


def _failed(ctr: ContainerFacts, call: _DevCall, peer: Peer, exc: WireError) -> EngineError:
    return EngineError(
        f"{ctr.name}: {call.method} {call.path} over its private network ({peer.host}) failed",
        details=exc.message,
    )


def _private_peer(ctr: ContainerFacts, port: int) -> Peer | None:
    """The engine's listener at the container's address on its own networks, when this machine
    reaches it on that network's bridge; None: go through `docker exec`. Probed once per container
    and address; never for a remote engine (its bridges are elsewhere)."""
    if not ctr.target.is_local:
        return None
    for net in ctr.addresses:
        key = (ctr.id, net.address, port)
        if key not in _reachable:
            _reachable[key] = _on_its_bridge(net.address, net.gateway, port)
        if _reachable[key]:
            return Peer(net.address, port)
    return None


def _on_its_bridge(address: str, gateway: str, port: int) -> bool:
    """ADDRESS:PORT connects from this host's side of the container's network: the socket's local
    address is the network's gateway. A local engine over a unix socket is not proof enough (rootless
    docker, Docker Desktop and colima keep their bridges in another namespace or VM, where a 172.x
    address may route to another host); only a host on the bridge gets the gateway as its source."""
    try:
        with socket.create_connection((address, port), timeout=CONNECT_S) as sock:
            return bool(gateway) and sock.getsockname()[0] == gateway
    except OSError:
        return False


def _exec_call(ctr: ContainerFacts, port: int, call: _DevCall) -> tuple[int, str]:
    url = f"http://127.0.0.1:{port}{call.path}"
    argv = ["python3", "-I", "-c", CLIENT, url, call.method, call.payload or "", str(call.timeout)]
    code, text = engine.exec_output(ctr, argv, max_bytes=MAX_ANSWER)
    status, _, answer = text.partition("\n")
    if code != 0 or not status.strip().isdigit():
        raise EngineError(
            f"{ctr.name}: {call.method} {call.path} inside the container failed (exit {code})",
            details=text[-800:],
        )
    return int(status), answer


def _ok(ctr: ContainerFacts, port: int, call: _DevCall) -> str:
    status, answer = _call(ctr, port, call)
    if status != 200:
        raise EngineError(
            f"{ctr.name}: {call.method} {call.path} answered {status}", details=answer[:800]
        )
    return answer


def is_sleeping(ctr: ContainerFacts, port: int, strict: bool = False) -> bool | None:
    """True/False from /is_sleeping; None: no such route (no sleep mode), or no answer after three
    tries (a loaded engine's exec) — with STRICT an EngineError (never asleep taken for awake)."""
    for attempt in range(3):
        try:
            status, answer = _call(ctr, port, _DevCall("GET", stages.IS_SLEEPING, timeout=10))
            doc = json.loads(answer) if status == 200 else {}
        except (EngineError, ValueError):
            time.sleep(0.5 * (attempt + 1))
            continue
        value = doc.get("is_sleeping") if isinstance(doc, dict) else None
        return value if isinstance(value, bool) else None
    if strict:
        msg = f"{ctr.name}: cannot tell whether the engine sleeps (/is_sleeping did not answer)"
        raise EngineError(msg)
    return None


def _record(project: Project, name: str) -> Path:
    return privatestate.state_dir(project, "standby") / f"{name}.json"


def sleep(project: Project, h: Handle, level: int, mode: str = "wait", held: Held = None) -> Asleep:
    """Put H's engine to sleep; recorded: level, when, its residue (beside the others HELD)."""
    r, port = h.r, h.r.profile.service.port.container
    # a signal meanwhile acts once the sleep is answered and kept (cut short, the engine falls asleep
    # after an undo found it awake: it says so until it sleeps); a second one acts at once
    with interrupts.deferred(SIGINT, SIGTERM, SIGHUP):
        _ok(h.ctr, port, _DevCall("POST", f"{stages.SLEEP}?level={level}&mode={mode}", timeout=600))
        residue, how = _residue(project, h, held)
        asleep = Asleep(level, privatestate.stamp(), residue, how)
        privatestate.write_json(_record(project, r.name), dataclasses.asdict(asleep))
    return asleep


def wake(project: Project, r: Resolved, ctr: ContainerFacts, level: int) -> float:
    """Wake R's engine (the steps its level needs); seconds taken."""
    port, started = r.profile.service.port.container, time.monotonic()
    if level == 2:
        _ok(ctr, port, _DevCall("POST", f"{stages.WAKE_UP}?tags=weights"))
        _ok(ctr, port, _DevCall("POST", stages.COLLECTIVE_RPC, {"method": "reload_weights"}, 1800))
        _ok(ctr, port, _DevCall("POST", f"{stages.WAKE_UP}?tags=kv_cache"))
    else:
        _ok(ctr, port, _DevCall("POST", stages.WAKE_UP, timeout=600))
    # awake: only the figure the last sleep measured stays (the memory plan's, not a log window)
    kept: dict = privatestate.read_json(_record(project, r.name), {})
    privatestate.write_json(_record(project, r.name), {k: kept.get(k) for k in KEPT})
    return time.monotonic() - started


def state(
    project: Project, r: Resolved, ctr: ContainerFacts, strict: bool = False
) -> Asleep | None:
    """R's engine asleep (with what composegen recorded); None: awake, or no sleep mode."""
    port = r.profile.service.port.container
    if r.profile.standby is None or not ctr.running or not is_sleeping(ctr, port, strict):
        return None
    doc: dict = privatestate.read_json(_record(project, r.name), {})
    level = doc["level"] if doc.get("level") in (1, 2) else r.profile.standby.level
    since = doc.get("since") if isinstance(doc.get("since"), str) else None
    return Asleep(level=int(level), since=since, residue_gib=residue_kept(project, r.name))


@dataclass(frozen=True)
class Handle:
    """A running stack on the standby path, looked up once when a switch, a wake or a sleep begins:
    R, its vLLM container as listed then, its sleep state as asked then (None: awake or no sleep
    mode). Passed down in place of a name each step would look up again."""

    r: Resolved
    ctr: ContainerFacts
    asleep: Asleep | None


Held = Mapping[str, Handle] | None  # the handles of a switch by name (None: look up)
Known = Mapping[str, Resolved] | None  # profiles resolved already, by name


def handles(
    project: Project, strict: Collection[str] = (), known: Known = None, only: str | None = None
) -> dict[str, Handle]:
    """The project's stacks running on this engine (ONLY: that one's) from one listing (KNOWN:
    resolved already), each asked once whether it sleeps (STRICT: the names whose "cannot tell" is
    an EngineError). Multi-node stacks (no sleep mode) and broken profiles are left out."""
    names, found = {only} if only else set(project.profile_names()), {}
    scope = resolve.prefix(project)
    listed = engine.project_containers(compose_project(only, None, scope)) if only else None
    for ctr in engine.composegen_containers() if listed is None else listed:
        if not (ctr.running and ctr.service == "vllm" and ctr.profile in names):
            continue
        try:
            r = (known or {}).get(ctr.profile or "") or resolve.load(project, ctr.profile or "")
        except ComposegenError:  # a broken profile: not ours to judge here
            continue
        if r.profile.nodes is None and ctr.project == compose_project(r.name, None, r.prefix):
            found[r.name] = Handle(r, ctr, state(project, r, ctr, r.name in strict))
    return found


def residue_kept(project: Project, name: str) -> float | None:
    """The GPU memory NAME's engine kept the last time composegen put it to sleep (None: never)."""
    doc: dict = privatestate.read_json(_record(project, name), {})
    found = doc.get("residue_gib")
    return float(found) if isinstance(found, int | float) and 0 <= found < 1e6 else None


def share(r: Resolved) -> float:
    """An awake engine's part of each of its GPUs (vLLM reserves it at start, a wake maps it back)."""
    value = r.flag("gpu-memory-utilization")
    return float(value) if value is not None else DEFAULT_UTILIZATION


def gpu_size(r: Resolved, ctr: ContainerFacts | None, emulated: bool) -> float | None:
    """One of R's GPUs in GiB: EMULATED, EMU_GPU_GIB (the emulator's ledger); else CTR's startup log."""
    if emulated:
        return gpuledger.gpu_gib({k: str(v) for k, v in r.profile.emulate.env.items()})
    total = startup_check(r, ctr).gpu_total_gib if ctr is not None else None
    return float(total) if total else None


def _residue(project: Project, h: Handle, held: Held) -> tuple[float | None, str | None]:
    """H's own residue: the `still in use` line (the whole GPU's) minus what the project's other
    running stacks hold on the fullest of H's GPUs, clamped at 0; and where it came from."""
    found = stages.SLEEP_RESIDUE.findall(engine.logs(h.ctr, tail=200))
    if not found:
        return None, None
    in_use = float(found[-1])
    try:
        gpu, on = _fullest(project, h, held)
    except ComposegenError as exc:  # the engine sleeps already: the figure is kept, said unsplit
        return in_use, f"its `still in use` line {in_use:.2f} GiB, others unread ({exc.message})"
    if not on:
        return in_use, f"its `still in use` line {in_use:.2f} GiB, nothing else on its GPUs"
    own = round(max(in_use - sum(gib for gib, _ in on), 0.0), 2)
    others = " - ".join(who for _, who in on)
    return own, f"GPU {gpu}'s `still in use` line {in_use:.2f} GiB - {others}"


def _fullest(project: Project, h: Handle, held: Held) -> tuple[str, list]:
    """The fullest of H's GPUs by what the project's other stacks (HELD, else listed) hold there."""
    r, ctr = h.r, h.ctr
    mine = set(r.profile.service.gpus.ids())
    on: dict[str, list[tuple[float, str]]] = {gpu: [] for gpu in mine}
    for o in (handles(project) if held is None else held).values():
        shared = mine & set(o.r.profile.service.gpus.ids())
        if o.r.name != r.name and shared and o.ctr.emulated == ctr.emulated:
            size = 0.0 if o.asleep else gpu_size(r, ctr, ctr.emulated) or 0.0
            gib = (o.asleep.residue_gib or 0.0) if o.asleep else share(o.r) * size
            how = "asleep: kept residue" if o.asleep else f"awake: {share(o.r)} x {size:.2f} GiB"
            for gpu in shared:
                on[gpu].append((gib, f"{o.r.name} {gib:.2f} GiB ({how})"))
    gpu = max(on, key=lambda g: sum(h for h, _ in on[g]), default="")
    return gpu, on.get(gpu, [])
