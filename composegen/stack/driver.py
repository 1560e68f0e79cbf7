"""Driving a rendered stack on the engine: up (preflight, start, wait, summary), down, status, logs.

Only commands that need the engine import this module (render/diff/validate never do).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from composegen import render
from composegen.errors import BadInput, CheckFailed, EngineError, Interrupted
from composegen.profiles.resolved import Resolved
from composegen.project import Project
from composegen.stack import emulate as emulation
from composegen.stack import engine, preflight, readiness

TAIL_ON_FAILURE = 80
_REF = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)")


@dataclass
class UpOptions:
    emulate: bool = False
    timeout: float | None = None
    wait: bool = True
    down_on_failure: bool = False
    render_stale: bool = False
    reclaim_shm: bool = False


@dataclass
class Progress:
    """Callbacks the CLI gives to show progress; all optional."""

    check: Callable[[preflight.Check], None] = lambda c: None
    phase: Callable[[str, float], None] = lambda phase, t: None
    tick: Callable[[float, str], None] = lambda t, last_line: None


def api_key(r: Resolved) -> str | None:
    """The stack's API key, read from our environment where the profile references it."""
    value = r.profile.service.environment.get("VLLM_API_KEY")
    if isinstance(value, str):
        m = _REF.match(value)
        return os.environ.get(m.group(1)) if m else None
    return None


def endpoint(r: Resolved) -> readiness.Endpoint:
    if r.profile.nodes is not None:  # the head's API on its host network, wherever that host is
        from composegen.stack import multinode

        return multinode.api_endpoint(r)
    p = r.profile.service.port
    host = "127.0.0.1" if p.bind in ("0.0.0.0", "") else ("::1" if p.bind == "::" else p.bind)
    return readiness.Endpoint(host, p.host, api_key(r))


def compose_files(project: Project, r: Resolved) -> list:
    return [project.out_path(r.name)]


def stack(project: Project, r: Resolved, emulated: bool | None = None, node: str | None = None) -> engine.Stack:
    """The compose stack of a profile; for a multi-node profile one node's (default: the head's)."""
    if r.profile.nodes is not None:
        from composegen.stack import multinode

        return multinode.node_stack(project, r, multinode.ref(r, node), emulated)
    files = compose_files(project, r)
    override = emulation.override_path(project, r.name)
    if emulated is None:  # later commands (down, logs) must name the same files `up` used
        emulated = override.is_file() and any(
            c.labels.get(emulation.EMULATED_LABEL) for c in engine.project_containers(render.project_name(r))
        )
    if emulated:
        files.append(override)
    return engine.Stack(render.project_name(r), files)


def ensure_fresh(project: Project, r: Resolved, render_stale: bool) -> None:
    """out/ must hold exactly what the profile renders now (every node's file for a multi-node profile)."""
    stale = {}
    for key, text in render.render_stack(r).items():
        path = project.out_path(key)
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            continue
        if not render_stale:
            state = "stale" if path.is_file() else "missing"
            raise CheckFailed(
                f"{project.rel(path)} is {state} for profiles/{r.name}.yaml",
                hint="run `composegen render` (or `up --render`)",
            )
        stale[key] = text
    render.write(project, stale)


@dataclass
class UpResult:
    name: str
    project: str
    emulated: bool
    checks: list[preflight.Check]
    warnings: list[str] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)
    time_to_ready_s: float | None = None
    detection_latency_s: float | None = None
    endpoint: str = ""
    startup: dict | None = None

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "project": self.project,
            "emulated": self.emulated,
            "checks": [c.to_json() for c in self.checks],
            "warnings": self.warnings,
            "phases": [{"phase": k, "seconds": v} for k, v in self.phases.items()],
            "time_to_ready_s": self.time_to_ready_s,
            "detection_latency_s": self.detection_latency_s,
            "endpoint": self.endpoint,
            "startup": self.startup,
        }


def up(project: Project, r: Resolved, opts: UpOptions, progress: Progress = Progress()) -> UpResult:
    if r.profile.nodes is not None:
        from composegen.stack import multinode

        return multinode.up(project, r, opts, progress)
    ensure_fresh(project, r, opts.render_stale)
    checks = preflight.engine_checks()
    report_checks(checks, progress)
    stop_on_failure(checks)
    existing = [c for c in engine.project_containers(render.project_name(r)) if c.status == "running"]
    if existing:
        raise BadInput(
            f"{r.name} is already running ({existing[0].name})",
            hint=f"`composegen status {r.name}`, or `composegen down {r.name}` first",
        )
    image = r.profile.image
    ulimits = r.profile.service.ulimits_plain()
    warnings: list[str] = []
    if opts.emulate:
        image = engine.build_emulator_image()
    image_check = preflight.attempt("image", lambda: preflight.image_check(image, opts.emulate))
    more = [preflight.gpu_check(opts.emulate), preflight.port_check(r), image_check]
    if opts.reclaim_shm and r.profile.service.ipc == "host":
        more.append(preflight.reclaim_shm())
    image_ok = image_check.status == "ok"
    if ulimits and image_ok:  # the probe runs the image itself: only once we know it is there
        ceiling = engine.engine_rlimits(image)
        more.append(preflight.ulimit_check(ulimits, ceiling, opts.emulate))
        if opts.emulate:
            ulimits, clamp_warnings = emulation.clamp_ulimits(ulimits, ceiling)
            warnings += clamp_warnings
    more += preflight.shm_check(r)
    report_checks(more, progress)
    checks += more
    stop_on_failure(checks)
    if opts.emulate:
        emulation.write_override(project, r, image, ulimits)
    st = stack(project, r, emulated=opts.emulate)
    result = UpResult(r.name, st.project, opts.emulate, checks, warnings, endpoint=endpoint(r).base_url)
    started = time.monotonic()
    try:
        st.up()
    except EngineError:
        _remove_partial(st)  # a failed `compose up` can leave its network (or a created container) behind
        raise
    if not opts.wait:
        return result
    timeout = opts.timeout or r.profile.service.startup_timeout
    try:
        waited = _wait(st, r, timeout, progress)
    except (EngineError, readiness.StackFailed, TimeoutError) as exc:
        ctr = vllm_container(st)
        tail = failure_details(engine.logs(ctr), f"last {TAIL_ON_FAILURE} log lines") if ctr else None
        if opts.down_on_failure:
            st.down(timeout=grace_seconds(r))
        message = str(exc) if not isinstance(exc, EngineError) else exc.message
        left = (
            "stopped and removed (--down-on-failure)"
            if opts.down_on_failure
            else f"left as it is: `composegen logs {r.name}`, `composegen down {r.name}`"
        )
        raise EngineError(f"{r.name}: {message}; the stack was {left}", details=tail) from None
    except KeyboardInterrupt:
        raise interrupted(r) from None
    return finish(result, r, vllm_container(st), waited, started)


def interrupted(r: Resolved, where: str = "") -> Interrupted:
    """Ctrl-C while waiting: stop waiting only; the stack keeps running and we say how to reach it."""
    return Interrupted(
        f"stopped waiting for {r.name}; the stack keeps running{where}",
        hint=f"inspect: `composegen status {r.name}`, `composegen logs {r.name} -f`; stop: `composegen down {r.name}`",
    )


def finish(result: UpResult, r: Resolved, ctr, waited: readiness.Waited, started: float) -> UpResult:
    """Fill the ready summary from the (head) container's own startup log."""
    result.phases = waited.phases
    result.time_to_ready_s = round(time.monotonic() - started, 3)
    result.startup = startup_for(r, ctr)
    result.detection_latency_s = _detection_latency(ctr, waited)
    return result


def _wait(st: engine.Stack, r: Resolved, timeout: float, progress: Progress) -> readiness.Waited:
    ctr_box: list = []
    last_line = [""]

    def state():
        if not ctr_box:
            ctr = vllm_container(st)
            if ctr is None:
                return "", None, 0
            ctr_box.append(ctr)
        ctr = ctr_box[0]
        ctr.reload()
        s = ctr.attrs["State"]
        return s.get("Status", ""), s.get("ExitCode"), ctr.attrs.get("RestartCount", 0)

    def tick(t: float):
        if ctr_box and int(t * 10) % 10 == 0:  # the last log line, once a second
            lines = engine.logs(ctr_box[0], 1).strip().splitlines()
            last_line[0] = lines[-1] if lines else last_line[0]
        progress.tick(t, last_line[0])

    return readiness.wait_ready(
        state,
        endpoint(r),
        r.profile.model.served_name,
        max_model_len(r),
        timeout,
        on_phase=progress.phase,
        on_tick=tick,
    )


def max_model_len(r: Resolved) -> int | None:
    value = r.flag("max-model-len")
    return value if isinstance(value, int) and value > 0 else None


def vllm_container(st: engine.Stack):
    ctrs = [c for c in st.containers() if c.labels.get("com.docker.compose.service") == "vllm"]
    return ctrs[0] if ctrs else None


def _detection_latency(ctr, waited: readiness.Waited) -> float | None:
    """Seconds from the engine logging `Application startup complete.` (Docker's timestamp) to our
    seeing /health 200: what polling costs, measured rather than assumed."""
    if ctr is None or waited.ready_at is None:
        return None
    raw = ctr.logs(timestamps=True, stdout=True, stderr=True).decode("utf-8", "replace")
    for line in raw.splitlines():
        if "Application startup complete." in line:
            when = engine.docker_time(line.split(" ", 1)[0])
            return round(waited.ready_at - when, 3) if when is not None else None
    return None


def startup_for(r: Resolved, ctr) -> dict:
    from composegen.vllm import startup

    report = startup.parse_startup_log(engine.logs(ctr)).to_json()
    return with_mismatches(r, report)


def with_mismatches(r: Resolved, report: dict) -> dict:
    """Profile flags whose effective value differs from the engine's own `non-default args` line;
    null when the log has no such line (nothing to compare is not "no mismatch")."""
    from composegen.vllm import startup

    args = report.get("effective_args")
    report["mismatches"] = startup.mismatches(r.engine_flags(), args) if args is not None else None
    return report


def running_container(project: Project, r: Resolved):
    """The profile's running vLLM container (the head of a multi-node stack), or EngineError (exit 3)."""
    if r.profile.nodes is not None:
        from composegen.stack import multinode

        ctr = multinode.node_container(project, r)
    else:
        ctr = vllm_container(stack(project, r))
    if ctr is None or ctr.status != "running":
        state = "is not running" if ctr is None else f"is {ctr.status}"
        raise EngineError(
            f"{r.name} {state}", hint=f"`composegen up {r.name}` first (`composegen status` lists what runs)"
        )
    return ctr


def live_identity(ctr) -> dict:
    """What the running container really is: the profile hash it was started from, its image, emulated or not."""
    image = ctr.image
    return {
        "hash": ctr.labels.get("io.composegen.hash"),
        "image_id": image.id,
        "repo_digests": sorted(image.attrs.get("RepoDigests") or []),
        "emulated": ctr.labels.get(emulation.EMULATED_LABEL) == "true",
    }


def down(project: Project, r: Resolved, timeout: int | None = None) -> dict:
    if r.profile.nodes is not None:
        from composegen.stack import multinode

        return multinode.down(project, r, timeout)
    st = stack(project, r)
    before = [c.name for c in st.containers()]
    st.down(timeout=timeout if timeout is not None else grace_seconds(r))
    left = [c.name for c in engine.project_containers(st.project)] + [
        n.name for n in engine.project_networks(st.project)
    ]
    if left:
        raise EngineError(f"{r.name}: still present after down: {', '.join(left)}")
    emulation.override_path(project, r.name).unlink(missing_ok=True)
    return {"name": r.name, "project": st.project, "removed": before}


def grace_seconds(r: Resolved) -> int:
    text = r.profile.service.stop_grace_period
    total = 0.0
    for number, unit in re.findall(r"(\d+(?:\.\d+)?)(ns|us|ms|s|m|h)", text):
        total += float(number) * {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}[unit]
    return max(1, int(round(total)))


def report_checks(checks, progress: Progress) -> None:
    for c in checks:
        progress.check(c)


def stop_on_failure(checks) -> None:
    failed = [c for c in checks if c.status == "fail"]
    if failed:
        first = failed[0]
        raise EngineError(
            f"preflight {first.name}: {first.message}",
            details="\n".join(f"preflight {c.name}: {c.message}" for c in failed[1:]) or None,
        )


def _remove_partial(st: engine.Stack) -> None:
    try:
        st.down(timeout=1)
    except EngineError:
        pass  # the original failure is the one to report


def failure_details(log_text: str, title: str, lines: int = TAIL_ON_FAILURE) -> str | None:
    """The log's last lines, then what the startup parser recognises in the whole log, with hints
    (e.g. KV memory too small → the longest max-model-len that fits)."""
    from composegen.vllm import startup

    tail = "\n".join(log_text.rstrip().splitlines()[-lines:])
    text = _indent(tail, title) or ""
    for error in startup.parse_startup_log(log_text).to_json()["errors"]:
        text += f"\nrecognised {error['kind']}: {error['hint']}"
    return text or None


def _indent(text: str, title: str) -> str | None:
    if not text.strip():
        return None
    return f"--- {title} ---\n" + text.rstrip()
