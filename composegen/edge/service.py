"""The edge's own containers: `edge up` (refuses a stale out/edge/, publishes the routes, starts or
updates the proxy and gatekeeper, then a graceful `caddy reload`), `edge down`, `edge ca` (the
internal CA's root certificate), and the facts `status` shows."""

from __future__ import annotations

import time

from composegen import ledger, privatestate
from composegen.buildcontext import write_context
from composegen.edge import config, image, keys, routes
from composegen.edge.config import Edge
from composegen.edge.render import DOOR_ADMIN, render_edge
from composegen.errors import BadInput, CheckFailed, EngineError
from composegen.project import Project
from composegen.stack import driver
from composegen.stack.driver import ContainerFacts

ROOT_CERT = "/data/caddy/pki/authorities/local/root.crt"
# service -> its graceful reload (the door's admin API is a unix socket: it shares host networking)
_CADDY, _ADAPTER = ["caddy", "reload", "--config"], ["--adapter", "caddyfile"]
RELOADS = {
    "proxy": [*_CADDY, "/etc/caddy/Caddyfile", *_ADAPTER],
    "door": [*_CADDY, "/etc/caddy/door.Caddyfile", *_ADAPTER, "--address", DOOR_ADMIN],
}


def load(project: Project) -> Edge:
    if not config.configured(project):
        msg = f"{config.EDGE_FILE}: no edge configured in this project"
        raise BadInput(msg, hint="see `composegen docs edge`")
    return config.load(project)


def ensure_fresh(project: Project, edge: Edge) -> None:
    drift = ledger.check(project, render_edge(edge), all_profiles=False)
    if drift:
        paths = ", ".join(d.path for d in drift)
        raise CheckFailed(
            f"out/edge/ is stale or missing ({paths})", hint="run `composegen render`"
        )


def stack(edge: Edge, project: Project) -> driver.Stack:
    return driver.Stack(edge.project_name, [project.out_path("edge")])


# compose writes it on every container
COMPOSE_FILES_LABEL = "com.docker.compose.project.config_files"


def containers(edge: Edge, project: Project) -> dict[str, ContainerFacts]:
    """{"proxy": …, "door": …, "gate": …} of this project's running edge (missing keys: not there).
    The compose project is named after edge.yaml's `name`, which two projects on one engine may
    share: a container started from another project's out/edge/compose.yaml is refused, never taken
    for ours."""
    found = {c.service: c for c in driver.project_containers(edge.project_name) if c.service}
    ours = str(project.out_path("edge"))
    foreign = sorted({c.labels.get(COMPOSE_FILES_LABEL, "?") for c in found.values()} - {ours})
    if found and foreign:
        raise CheckFailed(
            f"{edge.project_name} runs for another project ({', '.join(foreign)[:300]}), not {ours}",
            hint="give this project's edge another `name` in edge.yaml, then `composegen render`",
        )
    return found


def running(edge: Edge, project: Project) -> dict[str, ContainerFacts]:
    """The edge's containers, every one running; else the one step that helps (exit 3)."""
    found = containers(edge, project)
    down = [s for s in ("proxy", "door", "gate") if s not in found or not found[s].running]
    if down:
        msg = f"{edge.project_name} is not running ({', '.join(down)})"
        raise EngineError(msg, hint="`composegen edge up` first")
    return found


def _door_ports_taken(edge: Edge) -> list[str]:
    """The door's loopback listeners that something else holds: its Caddy would restart on them
    forever, so `edge up` refuses first."""
    wanted = [(edge.config.metrics.port, f"`metrics.port` in {config.EDGE_FILE}")]
    wanted += [
        (r.profile.service.port.host, f"`service.port.host` in profiles/{n}.yaml")
        for n, r in edge.stacks.items()
    ]
    return [why for port, knob in wanted if (why := driver.loopback_conflict(port, knob))]


def up(project: Project) -> Edge:
    edge = load(project)
    ensure_fresh(project, edge)
    if not keys.keys_path(project).exists():
        privatestate.write_json(keys.keys_path(project), {"clients": []})
    # another project's edge of the same name: refused before anything changes
    door = containers(edge, project).get("door")
    # the pin first: a refusal about the edge.yaml in hand, whatever else holds the ports
    for ref in sorted({edge.config.images.proxy, edge.config.images.gate}):
        if image.is_local(ref) and not driver.image_present(ref):
            build_local(ref)
    if door is None or not door.running:  # a door left restarting on a taken port is refused too
        taken = _door_ports_taken(edge)
        if taken:
            raise EngineError(taken[0], details="\n".join(taken[1:]) or None)
    routes.publish(project, edge)
    stack(edge, project).up()
    reload(edge, project)
    return edge


def build_local(pinned: str) -> None:
    """Build the pinned local image from this machine's caddy — only when its content gives that
    very tag."""
    import tempfile
    from pathlib import Path

    try:
        files = image.context_files()
    except OSError as exc:
        raise EngineError(
            f"{pinned} is not here and cannot be built: {exc.strerror}: {exc.filename}",
            hint="install Debian's caddy (apt-get install caddy ca-certificates), or pin a registry digest",
        ) from None
    tag = image.local_tag(files)
    if tag != pinned:
        raise CheckFailed(
            f"edge.yaml pins {pinned}, but this machine's caddy and CA bundle make {tag}",
            hint=f"pin images {{proxy: {tag}, gate: {tag}}} after checking `caddy version`, then `composegen render`",
        )
    with tempfile.TemporaryDirectory(prefix="composegen-edge-image-") as tmp:
        ctx = write_context(Path(tmp), files)
        driver.build_image(tag, ctx, {"BASE": driver.BASE_IMAGE}, "the edge image")


def reload(edge: Edge, project: Project, timeout: float = 30.0) -> None:
    """A graceful reload of the proxy and the door through Caddy's admin API (inside each
    container): open connections finish."""
    deadline = time.monotonic() + timeout
    for service, argv in RELOADS.items():
        while True:
            found = containers(edge, project).get(service)
            if found is not None and found.running:
                try:
                    code, text = driver.exec_output(found, argv)
                except EngineError as exc:  # restarted between the listing and the exec
                    code, text = -1, exc.message
                if code == 0:
                    break
                if time.monotonic() > deadline:
                    msg = f"{edge.project_name}: caddy reload of the {service} failed"
                    raise EngineError(msg, details=text[-2000:])
            elif time.monotonic() > deadline:
                raise EngineError(f"{edge.project_name}: the {service} is not running")
            time.sleep(0.5)


def down(project: Project) -> Edge:
    edge = load(project)
    containers(edge, project)  # never another project's
    stack(edge, project).down(timeout=10)
    return edge


def root_certificate(project: Project, timeout: float = 30.0) -> str:
    edge = load(project)
    if edge.config.tls.mode != "internal":
        msg = f"{config.EDGE_FILE}: tls.mode is {edge.config.tls.mode}; only `internal` has a CA of its own"
        raise BadInput(msg)
    deadline = time.monotonic() + timeout
    while True:  # Caddy makes its CA on the first start: give it a moment
        proxy = running(edge, project)["proxy"]
        code, text = driver.exec_output(proxy, ["cat", ROOT_CERT], max_bytes=64 << 10)
        if code == 0 and text.startswith("-----BEGIN CERTIFICATE-----"):
            return text
        if time.monotonic() > deadline:
            raise EngineError(f"{edge.project_name}: no root certificate at {ROOT_CERT}")
        time.sleep(0.5)
