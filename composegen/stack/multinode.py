"""Multi-node stacks: one profile across several Docker engines (vLLM's own --nnodes launch, mp backend).

Every node of `nodes.members` has out/NAME/NODE/compose.yaml and its own compose project
`composegen-NAME-NODE` on its own engine (`docker_host` URL or `context`; neither = the local engine).
`driver.up/down/stack/endpoint` dispatch here for a profile with `nodes:`.

up: preflight every node — engine reachable (every unreachable node is named), nothing of the stack
  running, the image present on every engine with the SAME image ID (with --emulate the emulator image is
  built on the local engine and `docker save | docker load`ed to the others, so it keeps its ID), the
  nvidia runtime, the head's API and master ports free, ulimits, /dev/shm — then start the workers (rank
  order) and the head last, and wait for readiness on the head's API while watching every node's
  container. A failure names the node (rank, role, engine) and shows its last log lines; when a worker
  died, the worker is named even though the head is what fails next.
down: the head first (a clean stop tells the workers to finish), then the workers; every node is tried,
  and any node that cannot be reached or cleaned fails the command by name (exit 3).

JSON shapes:
  up    → driver.UpResult's shape plus "nodes": [{name, rank, role, engine, project}]; checks are named
          "NODE/check" ("compose" once for the client)
  down  → {name, project (the head's), removed[], nodes: [{name, rank, role, engine, project, removed[], error}]}
The per-node status and /dev/shm reports live in status.py (node_stack_status, node_shm_report).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from composegen import render
from composegen.errors import BadInput, ComposegenError, EngineError
from composegen.profiles.resolved import Resolved
from composegen.profiles.schema import Node
from composegen.project import Project
from composegen.stack import emulate as emulation
from composegen.stack import engine, preflight, readiness
from composegen.stack.driver import (
    TAIL_ON_FAILURE,
    Progress,
    UpOptions,
    UpResult,
    ensure_fresh,
    failure_details,
    finish,
    grace_seconds,
    interrupted,
    max_model_len,
    report_checks,
    stop_on_failure,
    vllm_container,
)

WORKER_POLL_S = 0.5


@dataclass(frozen=True)
class NodeRef:
    """One node of a multi-node profile and where it runs."""

    node: Node
    target: engine.Target
    key: str  # out/ key: NAME/NODE
    project: str  # compose project: composegen-NAME-NODE

    @property
    def role(self) -> str:
        return "head" if self.node.rank == 0 else "worker"

    @property
    def label(self) -> str:
        return f"node {self.node.name} (rank {self.node.rank}, {self.role}, {self.target.label})"

    def to_json(self) -> dict:
        return {
            "name": self.node.name,
            "rank": self.node.rank,
            "role": self.role,
            "engine": self.target.label,
            "project": self.project,
        }


def refs(r: Resolved) -> list[NodeRef]:
    """Every node, head first."""
    return [
        NodeRef(m, engine.Target(m.docker_host, m.context), render.node_key(r, m), render.project_name(r, m))
        for m in render.members(r)
    ]


def ref(r: Resolved, node: str | None = None) -> NodeRef:
    """A node by name (None: the head); BadInput naming the nodes there are."""
    nodes = refs(r)
    if node is None:
        return nodes[0]
    for n in nodes:
        if n.node.name == node:
            return n
    raise BadInput(f"{r.path}: nodes.members: no node {node!r} (nodes: {', '.join(n.node.name for n in nodes)})")


def node_stack(project: Project, r: Resolved, n: NodeRef, emulated: bool | None = None) -> engine.Stack:
    files = [project.out_path(n.key)]
    override = emulation.override_path(project, r.name, n.node.name)
    if emulated is None:  # later commands (down, logs) must name the same files `up` used
        emulated = override.is_file() and any(
            c.labels.get(emulation.EMULATED_LABEL) for c in engine.project_containers(n.project, n.target)
        )
    if emulated:
        files.append(override)
    return engine.Stack(n.project, files, n.target)


def api_endpoint(r: Resolved) -> readiness.Endpoint:
    """The head's API as seen from here: it listens on its host's network at service.port.bind:host."""
    from composegen.stack.driver import api_key

    p, head = r.profile.service.port, refs(r)[0]
    host = p.bind
    if p.bind in ("0.0.0.0", "::", ""):
        host = ("::1" if p.bind == "::" else "127.0.0.1") if head.target.is_local else _url_host(head.target)
    return readiness.Endpoint(host, p.host, api_key(r))


def _url_host(target: engine.Target) -> str:
    return urlsplit(target.url() or "").hostname or "127.0.0.1"


def _api_reachable(r: Resolved) -> preflight.Check:
    head, bind = refs(r)[0], r.profile.service.port.bind
    if not head.target.is_local and bind in ("127.0.0.1", "::1", "localhost"):
        return preflight.Check(
            "endpoint",
            "fail",
            f"the API binds {bind} on the remote head ({head.target.label}); composegen cannot poll "
            "it from here — bind 0.0.0.0 or the head's address (service.port.bind)",
        )
    return preflight.Check("endpoint", "ok", f"the head's API will answer at {api_endpoint(r).base_url}")


# ---- up -------------------------------------------------------------------------------------------


@dataclass
class MultiUpResult(UpResult):
    nodes: list[dict] = field(default_factory=list)

    def to_json(self) -> dict:
        return {**super().to_json(), "nodes": self.nodes}


class NodeFailed(Exception):
    def __init__(self, n: NodeRef, message: str):
        super().__init__(message)
        self.ref = n


def up(project: Project, r: Resolved, opts: UpOptions, progress: Progress = Progress()) -> MultiUpResult:
    ensure_fresh(project, r, opts.render_stale)
    nodes = refs(r)
    checks = [preflight.attempt("compose", lambda: f"docker compose {engine.compose_version()}")]
    checks += [
        preflight.attempt(
            f"{n.node.name}/engine",
            lambda n=n: f"Docker {engine.engine_info(n.target).get('ServerVersion', '?')} at {n.target.label} reachable",
        )
        for n in nodes
    ]
    report_checks(checks, progress)
    stop_on_failure(checks)
    for n in nodes:
        running = [c for c in engine.project_containers(n.project, n.target) if c.status == "running"]
        if running:
            raise BadInput(
                f"{r.name} is already running on {n.label}: {running[0].name}",
                hint=f"`composegen status {r.name}`, or `composegen down {r.name}` first",
            )
    image, more = _place_image(r, nodes, opts.emulate)
    more.append(_api_reachable(r))
    report_checks(more, progress)
    checks += more
    stop_on_failure(checks)
    warnings: list[str] = []
    ulimits = r.profile.service.ulimits_plain()
    per_node_ulimits = {}
    if opts.reclaim_shm and r.profile.service.ipc == "host":
        warnings += _reclaim(nodes)
    for n in nodes:
        node_checks, ceiling = preflight.node_checks(r, n.node, n.target, image, opts.emulate)
        report_checks(node_checks, progress)
        checks += node_checks
        per_node_ulimits[n.key] = ulimits
        if opts.emulate and ulimits and ceiling is not None:
            per_node_ulimits[n.key], clamped = emulation.clamp_ulimits(ulimits, ceiling)
            warnings += [f"{n.node.name}: {w}" for w in clamped]
    stop_on_failure(checks)
    if opts.emulate:
        for n in nodes:
            emulation.write_override(project, r, image, per_node_ulimits[n.key], n.node)
    stacks = [(n, node_stack(project, r, n, emulated=opts.emulate)) for n in nodes]
    result = MultiUpResult(
        r.name,
        nodes[0].project,
        opts.emulate,
        checks,
        warnings,
        endpoint=api_endpoint(r).base_url,
        nodes=[n.to_json() for n in nodes],
    )
    started = time.monotonic()
    for n, st in [*stacks[1:], stacks[0]]:  # workers first: the head's rendezvous waits for them anyway
        try:
            st.up()
        except EngineError as exc:
            _fail(r, stacks, n, exc.message, opts, details=exc.details)
    if not opts.wait:
        return result
    try:
        waited = _wait(stacks, r, opts.timeout or r.profile.service.startup_timeout, progress)
    except (EngineError, readiness.StackFailed, TimeoutError, NodeFailed) as exc:
        blamed, message = _blame(exc, stacks)
        _fail(r, stacks, blamed, message, opts)
    except KeyboardInterrupt:
        raise interrupted(r, " on every node") from None
    return finish(result, r, vllm_container(stacks[0][1]), waited, started)


def format_text(result: MultiUpResult) -> str:
    """The `up` summary of console.summary_text, plus one line per node."""
    from composegen.cli.console import summary_text

    nodes = [
        f"  node {n['name']:<12} rank {n['rank']} {n['role']:<7} {n['engine']}  ({n['project']})" for n in result.nodes
    ]
    return summary_text(result) + "\n".join(nodes) + "\n"


def _place_image(r: Resolved, nodes: list[NodeRef], emulate: bool) -> tuple[str, list[preflight.Check]]:
    """The image on every engine, and one check per node plus the image-ID comparison."""
    image = r.profile.image
    checks: list[preflight.Check] = []
    if emulate:
        try:
            image = engine.build_emulator_image()  # on this machine's engine, then copied: one ID everywhere
            local_id = engine.image_id(image)
            for n in nodes:
                if n.target != engine.DEFAULT and engine.image_id(image, n.target) != local_id:
                    engine.copy_image(image, engine.DEFAULT, n.target)
        except ComposegenError as exc:
            return image, [preflight.Check("image", "fail", f"placing the emulator image: {exc.message}")]
    ids = {}
    for n in nodes:
        check = preflight.attempt("image", lambda n=n: preflight.image_check(image, emulate, n.target))
        checks.append(preflight.Check(f"{n.node.name}/image", check.status, f"{check.message} on {n.target.label}"))
        if check.status == "ok":
            ids[n.node.name] = engine.image_id(image, n.target)
    if len(ids) == len(nodes) and len(set(ids.values())) > 1:
        listing = ", ".join(f"{name} {digest[:19]}…" for name, digest in ids.items())
        checks.append(
            preflight.Check(
                "image-digest",
                "fail",
                f"{image} is not the same image on every node ({listing}); "
                "copy one build everywhere (`docker save IMAGE | docker -H NODE load`) or pin a digest",
            )
        )
    elif len(ids) == len(nodes):
        checks.append(
            preflight.Check("image-digest", "ok", f"{image} is {next(iter(ids.values()))[:19]}… on every node")
        )
    return image, checks


def _reclaim(nodes: list[NodeRef]) -> list[str]:
    warnings = []
    if any(n.target.is_local for n in nodes):
        check = preflight.reclaim_shm()
        warnings += [check.message] if check.status != "ok" else []
    return warnings + [
        f"{n.node.name}: /dev/shm not reclaimed on a remote host; run `composegen shm --reclaim` there"
        for n in nodes
        if not n.target.is_local
    ]


def _wait(stacks: list, r: Resolved, timeout: float, progress: Progress) -> readiness.Waited:
    head_ref, head_stack = stacks[0]
    found: dict[str, object] = {}
    last = {"line": "", "workers": 0.0}

    def container(n: NodeRef, st: engine.Stack):
        if n.key not in found:
            ctr = vllm_container(st)
            if ctr is None:
                return None
            found[n.key] = ctr
        return found[n.key]

    def state():
        ctr = container(head_ref, head_stack)
        if ctr is None:
            return "", None, 0
        ctr.reload()
        s = ctr.attrs["State"]
        return s.get("Status", ""), s.get("ExitCode"), ctr.attrs.get("RestartCount", 0)

    def tick(t: float):
        if t - last["workers"] >= WORKER_POLL_S:
            last["workers"] = t
            for n, st in stacks[1:]:
                problem = _worker_problem(container(n, st))
                if problem:
                    raise NodeFailed(n, problem)
        head = found.get(head_ref.key)
        if head is not None and int(t * 10) % 10 == 0:  # the head's last log line, once a second
            lines = engine.logs(head, 1).strip().splitlines()
            last["line"] = lines[-1] if lines else last["line"]
        progress.tick(t, last["line"])

    return readiness.wait_ready(
        state,
        api_endpoint(r),
        r.profile.model.served_name,
        max_model_len(r),
        timeout,
        on_phase=progress.phase,
        on_tick=tick,
    )


def _worker_problem(ctr) -> str | None:
    if ctr is None:
        return "its container is gone"
    try:
        ctr.reload()
    except Exception:
        return "its container is gone"
    s = ctr.attrs["State"]
    if s.get("Status") in ("exited", "dead"):
        return f"the container exited with code {s.get('ExitCode')}"
    if s.get("Status") == "restarting":
        return f"the container is restarting (exit code {s.get('ExitCode')})"
    return None


def _blame(exc: Exception, stacks: list) -> tuple[NodeRef, str]:
    """The node to name: a dead worker is the cause even when the head is what failed."""
    message = exc.message if isinstance(exc, EngineError) else str(exc)
    if isinstance(exc, NodeFailed):
        return exc.ref, message
    for n, st in stacks[1:]:
        try:
            problem = _worker_problem(vllm_container(st))
        except ComposegenError as err:
            problem = f"its engine stopped answering ({err.message})"
        if problem:
            return n, f"{problem}; the head then failed too ({message})"
    return stacks[0][0], message


def _fail(r: Resolved, stacks: list, blamed: NodeRef, message: str, opts: UpOptions, details: str | None = None):
    tails = [details] if details else []
    # The named node's log first; when a worker is blamed, the head's end too (what it made of the loss).
    for n, st in sorted(stacks, key=lambda pair: pair[0] != blamed):
        if n == blamed or (n.role == "head" and blamed.role != "head"):
            tails.append(_tail(n, st, TAIL_ON_FAILURE if n == blamed else 20))
    if opts.down_on_failure:
        for _, st in stacks:
            try:
                st.down(timeout=grace_seconds(r))
            except EngineError as exc:
                tails.append(f"down on {st.target.label}: {exc.message}")
    left = (
        "stopped and removed (--down-on-failure)"
        if opts.down_on_failure
        else f"left as it is: `composegen logs {r.name}`, `composegen down {r.name}`"
    )
    raise EngineError(
        f"{r.name}: {blamed.label}: {message}; the stack was {left}", details="\n".join(t for t in tails if t) or None
    )


def _tail(n: NodeRef, st: engine.Stack, lines: int) -> str | None:
    try:
        ctr = vllm_container(st)
        text = engine.logs(ctr) if ctr is not None else ""
    except ComposegenError as exc:
        return f"(node {n.node.name}: logs unavailable: {exc.message})"
    return failure_details(text, f"node {n.node.name}: last {lines} log lines", lines)


# ---- down, logs ---------------------------------------------------------------------------------


def down(project: Project, r: Resolved, timeout: int | None = None) -> dict:
    grace = timeout if timeout is not None else grace_seconds(r)
    entries, errors = [], []
    for n in refs(r):  # head first: its clean stop tells the workers to finish
        entry = {**n.to_json(), "removed": [], "error": None}
        try:
            st = node_stack(project, r, n)
            entry["removed"] = [c.name for c in st.containers()]
            st.down(timeout=grace)
            left = [c.name for c in engine.project_containers(n.project, n.target)] + [
                x.name for x in engine.project_networks(n.project, n.target)
            ]
            if left:
                raise EngineError(f"still present after down: {', '.join(left)}")
            emulation.override_path(project, r.name, n.node.name).unlink(missing_ok=True)
        except ComposegenError as exc:
            entry["error"] = exc.message
            errors.append(f"{n.label}: {exc.message}")
        entries.append(entry)
    if errors:
        done = [f"{e['name']}: removed {', '.join(e['removed']) or 'nothing'}" for e in entries if e["error"] is None]
        raise EngineError(
            f"{r.name}: down failed on {len(errors)} of {len(entries)} node(s): {errors[0]}",
            details="\n".join(errors[1:] + done) or None,
        )
    return {
        "name": r.name,
        "project": entries[0]["project"],
        "removed": [c for e in entries for c in e["removed"]],
        "nodes": entries,
    }


def node_container(project: Project, r: Resolved, node: str | None = None):
    """The vLLM container of one node (default: the head), or None."""
    return vllm_container(node_stack(project, r, ref(r, node)))


def logs_text(project: Project, r: Resolved, tail: int | str = "all", node: str | None = None) -> str:
    """Logs of every node (or one), each under a `==> node NAME (rank R, role, engine) <==` header."""
    parts = []
    for n in [ref(r, node)] if node else refs(r):
        try:
            ctr = vllm_container(node_stack(project, r, n))
            text = engine.logs(ctr, tail) if ctr is not None else "(no container)\n"
        except ComposegenError as exc:
            text = f"(unreachable: {exc.message})\n"
        parts.append(f"==> {n.label} <==\n{text}")
    return "\n".join(parts)
