"""Everything `up` does before `docker compose up`, for every node of a deployment (one node for a
single-node profile): out/ is fresh, every engine answers, nothing of the stack runs, the image is
on every engine (the same image ID everywhere), each node's GPU runtime, ports, /dev/shm and
ulimits, and with --emulate the override per node. Each check goes to the progress sink as soon as
it is known; the first failure stops `up` (exit 3) naming every failed check."""

from __future__ import annotations

import functools
import os
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field

from composegen import ledger, rendercache
from composegen.addresses import is_loopback
from composegen.errors import BadInput, CheckFailed, ComposegenError, EngineError
from composegen.stack import emulate as emulation
from composegen.stack import engine, enginecache, loadstate, memguard, nodecache, preflight
from composegen.stack.placement import Deployment, NodeRef, vllm_container
from composegen.stack.preflight import Check
from composegen.stack.progress import ProgressSink, PullEvent
from composegen.stack.targets import DEFAULT


@dataclass
class UpOptions:
    emulate: bool = False
    timeout: float | None = None
    wait: bool = True
    down_on_failure: bool = False
    render_stale: bool = False
    reclaim_shm: bool = False
    allow_download: bool = False  # incomplete weights: start anyway, the engine downloads them


@dataclass
class Prepared:
    image: str
    checks: list[Check] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    weights_complete: bool = False  # on every node: the engine then runs with HF_HUB_OFFLINE=1
    memory_guard: bool = False  # a unified-memory node: watch MemAvailable until ready


def ensure_fresh(dep: Deployment, render_stale: bool) -> None:
    """out/ must hold exactly what the profile renders now (every node's file); answered from the
    render cache when the same inputs were compared before (rendercache.py)."""
    root = dep.project.root
    if rendercache.stack_fresh(root, dep.name):
        return
    # hashed before comparing: a file changed meanwhile misses next time
    before = rendercache.fingerprint(root)
    from composegen import render  # jinja2 and the templates: only when the record does not answer

    stale = {}
    for key, text in render.render_stack(dep.r).items():
        path = dep.project.out_path(key)
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            continue
        if not render_stale:
            state = "stale" if path.is_file() else "missing"
            raise CheckFailed(
                f"{dep.project.rel(path)} is {state} for profiles/{dep.name}.yaml",
                hint="run `composegen render` (or `up --render`)",
            )
        stale[key] = text
    if stale:
        ledger.write(dep.project, stale)
    else:
        rendercache.remember_stack(root, dep.name, before)


def prepare(dep: Deployment, opts: UpOptions, sink: ProgressSink) -> Prepared:
    """The checks run concurrently where they only wait on an engine, a socket or the disk (threads;
    each engine call has its deadline), and are reported in the same order as one after the other: a
    failure of out/'s freshness first, then the engines, …, the weights and memory last."""
    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="preflight") as pool:
        engines = pool.submit(_engine_checks, dep)  # asks the engines while out/ is hashed
        ensure_fresh(dep, opts.render_stale)
        prep = Prepared(dep.r.profile.image)
        _report(prep, sink, engines.result())
        return _checked(dep, opts, sink, prep, pool)


def _checked(
    dep: Deployment, opts: UpOptions, sink: ProgressSink, prep: Prepared, pool: Executor
) -> Prepared:
    if dep.behind_edge:
        _report(prep, sink, [_edge_check(dep)])
    _stop_on_failure(prep.checks)
    _refuse_running(dep)
    prep.image, image_checks, present = _place_image(dep, opts.emulate, sink)
    _report(prep, sink, image_checks)
    # a real image even when emulating: checked (pulled) here, once
    if dep.r.profile.monitoring.prometheus:
        _report(prep, sink, [_prometheus_image(dep, sink)])
    if dep.multi:
        _report(prep, sink, [_api_reachable(dep)])
    if opts.reclaim_shm and dep.r.profile.service.ipc == "host":
        _reclaim(dep, prep, sink)
    ulimits = dep.r.profile.service.ulimits_plain()
    per_node = {}
    nodes = [
        pool.submit(
            preflight.node_checks, dep, n, prep.image if n in present else None, opts.emulate
        )
        for n in dep.nodes
    ]
    later = pool.submit(_weights_and_memory, dep, opts, prep.image)
    for n, asked in zip(dep.nodes, nodes, strict=True):
        checks, ceiling = asked.result()
        _report(prep, sink, checks)
        per_node[n] = ulimits
        if opts.emulate and ulimits and ceiling is not None:
            per_node[n], clamped = emulation.clamp_ulimits(ulimits, ceiling)
            prep.warnings += [f"{n.name}: {w}" if n.member else w for w in clamped]
    weights, prep.weights_complete, memory, prep.memory_guard = later.result()
    _report(prep, sink, weights + memory)
    for n in dep.nodes:
        nodecache.offline_override(dep.project, dep.r, n.name, prep.weights_complete)
    _stop_on_failure(prep.checks)
    if opts.emulate:
        for n in dep.nodes:
            emulation.write_override(
                dep.project, dep.r, prep.image, per_node[n], n.member, n.target.is_local
            )
    return prep


def _edge_check(dep: Deployment) -> Check:
    """Behind the edge the stack publishes no port: without the edge's proxy nothing (not even
    `up`'s own readiness probe) could reach it."""
    network = dep.edge_network
    if network and engine.edge_proxy_running(network):
        reached = f"behind the edge: reached through {network}, no host port of its own"
        return Check("edge", "ok", reached)
    behind = f"{dep.name} is behind the edge (out/edge/stacks/{dep.name}.yaml)"
    why = f"{behind} and the edge is not running; start it first: `composegen edge up`"
    return Check("edge", "fail", why)


def _report(prep: Prepared, sink: ProgressSink, checks: list) -> None:
    for c in checks:
        prep.checks.append(c)
        sink.check(c)


class PreflightFailed(EngineError):
    """A preflight check failed: the first's reason, the rest in details; `failed` names all."""

    def __init__(self, failed: list[Check]) -> None:
        first = failed[0]
        super().__init__(
            f"preflight {first.name}: {first.message}",
            details="\n".join(f"preflight {c.name}: {c.message}" for c in failed[1:]) or None,
        )
        self.failed = [c.name for c in failed]


def _stop_on_failure(checks: list[Check]) -> None:
    failed = [c for c in checks if c.status == "fail"]
    if failed:
        raise PreflightFailed(failed)


def _engine_checks(dep: Deployment) -> list[Check]:
    """Every engine asked at once (threads: each answer is a wait on a socket), in node order."""

    def reachable(n: NodeRef) -> str:
        version = engine.engine_info(n.target).get("ServerVersion", "?")
        return f"Docker {version}{f' at {n.target.label}' if n.member else ''} reachable"

    def compose_version() -> str:
        return f"docker compose {enginecache.compose_version()}"

    workers = len(dep.nodes) + 1
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="preflight-engine") as pool:
        compose = pool.submit(preflight.attempt, "compose", compose_version)
        asked = [
            pool.submit(preflight.attempt, n.named("engine"), functools.partial(reachable, n))
            for n in dep.nodes
        ]
        return [*(a.result() for a in asked), compose.result()]


def _refuse_running(dep: Deployment) -> None:
    """Nothing of the stack may run already; probe containers an interrupted earlier `up` of this
    profile left are removed (the caller holds the profile's lock, so no other run owns them)."""
    for n in dep.nodes:
        running = [c for c in engine.project_containers(n.project, n.target) if c.running]
        head = vllm_container(running) if n == dep.head else None
        if head is not None:  # ready: the caller shows its summary; starting: `composegen wait`
            svc, served = dep.r.profile.service, dep.r.profile.model.served_name
            loadstate.refuse_running(dep.name, head, dep.endpoint(), served, svc.startup_timeout)
        if running:
            where = f" on {n.label}" if n.member else ""
            raise BadInput(
                f"{dep.name} is already running{where} ({running[0].name})",
                hint=f"`composegen status {dep.name}`, or `composegen down {dep.name}` first",
            )
        for probe in engine.probe_containers(n.project, n.target):
            engine.remove_container(probe)


def _place_image(
    dep: Deployment, emulate: bool, sink: ProgressSink
) -> tuple[str, list[Check], set[NodeRef]]:
    """The image, a check per node (and the digest check), the nodes holding the image. --emulate
    builds the emulator image here and copies it (`docker save | load`): one ID everywhere."""
    image = dep.r.profile.image
    checks: list[Check] = []
    pushed = os.environ.get("COMPOSEGEN_EMULATOR_IMAGE") if emulate else None
    if pushed:  # an emulator image pushed to a registry: pulled and checked like any image
        image, emulate = pushed, False
    elif emulate:
        try:
            image = engine.build_emulator_image()
            local_id = engine.image_id(image)
            for n in dep.nodes:
                if n.target != DEFAULT and engine.image_id(image, n.target) != local_id:
                    engine.copy_image(image, DEFAULT, n.target)
        except ComposegenError as exc:
            hint = f" (hint: {exc.hint})" if exc.hint else ""
            why = f"placing the emulator image: {exc.message}{hint}"
            return image, [Check("image", "fail", why)], set()
    ids: dict[str | None, str | None] = {}
    present: set[NodeRef] = set()
    for n in dep.nodes:

        def on_pull(
            layer: str, status: str, current: int | None, total: int | None, n: NodeRef = n
        ) -> None:
            sink.pull(PullEvent(n.name, image, layer, status, current, total))

        check = preflight.attempt(
            "image", functools.partial(preflight.image_check, image, emulate, n.target, on_pull)
        )
        where = f" on {n.target.label}" if n.member else ""
        checks.append(Check(n.named("image"), check.status, check.message + where))
        if check.status == "ok":
            present.add(n)
            ids[n.name] = engine.image_id(image, n.target)
    if dep.multi and len(ids) == len(dep.nodes):
        checks.append(_same_image(image, ids))
    return image, checks, present


def _prometheus_image(dep: Deployment, sink: ProgressSink) -> Check:
    image, head = dep.r.profile.monitoring.image, dep.head

    def on_pull(layer: str, status: str, current: int | None, total: int | None) -> None:
        sink.pull(PullEvent(head.name, image, layer, status, current, total))

    check = preflight.attempt(
        "prometheus", lambda: preflight.image_check(image, False, head.target, on_pull)
    )
    return Check("prometheus", check.status, f"monitoring.image: {check.message}")


def _same_image(image: str, ids: dict[str | None, str | None]) -> Check:
    if len(set(ids.values())) > 1:
        listing = ", ".join(f"{name} {(digest or '')[:19]}…" for name, digest in ids.items())
        copy = (
            "copy one build everywhere (`docker save IMAGE | docker -H NODE load`) or pin a digest"
        )
        why = f"{image} is not the same image on every node ({listing}); {copy}"
        return Check("image-digest", "fail", why)
    same = f"{image} is {(next(iter(ids.values())) or '')[:19]}… on every node"
    return Check("image-digest", "ok", same)


def _api_reachable(dep: Deployment) -> Check:
    head, bind = dep.head, dep.r.profile.service.port.bind
    if not head.target.is_local and is_loopback(bind):
        binds = f"the API binds {bind} on the remote head ({head.target.label})"
        how = "bind 0.0.0.0 or the head's address (service.port.bind)"
        return Check("endpoint", "fail", f"{binds}; composegen cannot poll it from here — {how}")
    return Check("endpoint", "ok", f"the head's API will answer at {dep.endpoint().base_url}")


def _reclaim(dep: Deployment, prep: Prepared, sink: ProgressSink) -> None:
    """`--reclaim-shm`: this machine's /dev/shm once (local nodes share it); remote by hand."""
    if any(n.target.is_local for n in dep.nodes):
        _report(prep, sink, [preflight.reclaim_shm()])
    prep.warnings += [
        f"{n.name}: /dev/shm not reclaimed on a remote host; run `composegen shm reclaim` there"
        for n in dep.nodes
        if not n.target.is_local
    ]


def _weights_and_memory(
    dep: Deployment, opts: UpOptions, image: str
) -> tuple[list[Check], bool, list[Check], bool]:
    """The pinned revision complete in every node's cache (and whether it is), and MemAvailable
    above the guard's floor (and whether the guard watches), issue 17."""
    weights, complete = nodecache.preflight_checks(dep, image, opts.emulate, opts.allow_download)
    memory, guard = memguard.preflight_checks(dep, image)
    return weights, complete, memory, guard
