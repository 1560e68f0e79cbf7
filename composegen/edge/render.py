"""out/edge/: the edge's compose file, its Caddyfile, the gatekeeper it runs, and one override per
stack behind it (joins the edge's private network, publishes no host port). Deterministic text from
edge.yaml and the profiles; `composegen render` writes it and `render --check` proves it fresh.

Traffic: client → proxy (Caddy: TLS, the route allowlist, everything else 404) → gate
(gatekeeper.py: per-client keys by hash, alias → stack, 503 while a switch runs) → stack-NAME:PORT
on the private network. The TLS listener is the only published port. The loopback listeners —
/NAME/metrics for Prometheus and, on each stack's own host port, the operator door composegen's
up/wait/gates/bench/top use — are served by the door: a second Caddy in the host's network
namespace, bound to 127.0.0.1, passing each request over a unix socket (a volume both containers
mount) to the proxy, which reaches the stacks. Docker publishes nothing for them, so no packet
routed to the Docker subnet from another machine can reach them (a published port can be: Docker
accepts forwarded packets to the container's address). The door never passes vLLM's dev-mode routes
(DEV_ROUTES).
"""

from __future__ import annotations

import json
from pathlib import Path

from composegen.edge.config import Edge, upstream_host
from composegen.ledger import GENERATED_HEADER

ALLOWED_PATHS = (
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/responses",
    "/v1/responses/*",
    "/v1/models",
    "/health",
)
HTTPS_PORT = 8443  # inside the proxy container: unprivileged, so it needs no capability
METRICS_PORT = 9090
GATE_PORT = 8080
GATE_SOURCE = Path(__file__).with_name("gatekeeper.py")
# the volume the proxy and the door share: one unix socket per loopback listener
SOCKETS = "/run/edge"
# the door shares the host's network: its admin API is a socket
DOOR_ADMIN = "unix//tmp/caddy-admin.sock"
# the gatekeeper's threads and buffers, bounded
GATE_LIMITS = {"mem_limit": "512m", "pids_limit": 1024}
# Routes vLLM serves only with VLLM_SERVER_DEV_MODE=1 (0.26.0's route list with and without it,
# ../shared/real-vllm/0.26.0-h200-sleep/): never through any listener of the edge.
DEV_ROUTES = (
    "/abort_requests", "/collective_rpc", "/finish_weight_update", "/get_world_size",
    "/init_weight_transfer_engine", "/is_paused", "/is_sleeping", "/pause", "/reset_encoder_cache",
    "/reset_mm_cache", "/reset_prefix_cache", "/resume", "/server_info", "/sleep",
    "/start_draft_weight_update", "/start_weight_update", "/update_weights", "/wake_up",
)  # fmt: skip
NOT_FOUND = '{"error": {"message": "not found", "type": "not_found", "param": null, "code": 404}}'


def stack_key(name: str) -> str:
    return f"edge/stacks/{name}.yaml"


def render_edge(edge: Edge) -> dict[str, str]:
    """{out/ key: text}: "edge" is out/edge/compose.yaml, the others are paths under out/."""
    files = {
        "edge": compose_text(edge),
        "edge/Caddyfile": caddyfile(edge),
        "edge/door.Caddyfile": door_caddyfile(edge),
        "edge/gatekeeper.py": gatekeeper_text(),
    }
    files.update({stack_key(name): stack_override(edge, name) for name in edge.stacks})
    return files


def _header(edge: Edge, comment: str = "#") -> str:
    source = edge.path
    return (
        f"{comment} {GENERATED_HEADER[2:]}{source}. "
        f"Do not edit: change {source} and run `composegen render`.\n"
    )


def gatekeeper_text() -> str:
    source = GATE_SOURCE.read_text(encoding="utf-8")
    return f"{GENERATED_HEADER}composegen/edge/gatekeeper.py (a copy the edge mounts; do not edit).\n{source}"


def compose_text(edge: Edge) -> str:
    c = edge.config
    bind = f"[{c.listen.bind}]" if ":" in c.listen.bind else c.listen.bind  # compose's IPv6 form
    ports = [f"{bind}:{c.listen.port}:{HTTPS_PORT}"]  # the only published port
    j = json.dumps
    hardened = [
        '    cap_drop: ["ALL"]',
        '    security_opt: ["no-new-privileges:true"]',
        "    read_only: true",
    ]
    lines = [
        _header(edge).rstrip("\n"),
        f"# tls: {c.tls.mode}  stacks: {', '.join(edge.stacks)}",
        f"name: {j(edge.project_name)}",
        "services:",
        "  proxy:",
        f"    image: {j(c.images.proxy)}",
        '    command: ["caddy", "run", "--config", "/etc/caddy/Caddyfile", "--adapter", "caddyfile"]',
        "    ports:",
        *[f"      - {j(p)}" for p in ports],
        "    volumes:",
        # the directory, not the file: a rename-replaced Caddyfile is seen on reload
        '      - ".:/etc/caddy:ro"',
        '      - "edge-data:/data"',  # the internal CA and certificates live here
        '      - "edge-config:/config"',
        f'      - "edge-sockets:{SOCKETS}"',
        '    environment: {"XDG_DATA_HOME": "/data", "XDG_CONFIG_HOME": "/config"}',
        "    networks: [default, edge]",
        *hardened,
        '    tmpfs: ["/tmp"]',
        '    restart: "unless-stopped"',
        f'    labels: {{"io.composegen.role": "edge-proxy", "io.composegen.edge": {j(c.name)}}}',
        "  door:",  # the loopback listeners: the host's network namespace, 127.0.0.1 only
        f"    image: {j(c.images.proxy)}",
        '    command: ["caddy", "run", "--config", "/etc/caddy/door.Caddyfile", "--adapter", "caddyfile"]',
        '    network_mode: "host"',
        "    volumes:",
        '      - ".:/etc/caddy:ro"',
        f'      - "edge-sockets:{SOCKETS}"',
        '    environment: {"XDG_DATA_HOME": "/tmp/data", "XDG_CONFIG_HOME": "/tmp/config"}',
        *hardened,
        '    tmpfs: ["/tmp"]',
        '    restart: "unless-stopped"',
        "    depends_on: [proxy]",
        f'    labels: {{"io.composegen.role": "edge-door", "io.composegen.edge": {j(c.name)}}}',
        "  gate:",
        f"    image: {j(c.images.gate)}",
        f'    command: ["python3", "-I", "/gate/gatekeeper.py", "--state", "/state", "--port", "{GATE_PORT}"]',
        "    volumes:",
        '      - "./gatekeeper.py:/gate/gatekeeper.py:ro"',
        # keys (hashes) and routes: re-read when they change
        '      - "../../.composegen/edge:/state:ro"',
        "    networks: [edge]",
        '    cap_drop: ["ALL"]',
        # read the 0600 state files whoever owns them on the host
        '    cap_add: ["DAC_READ_SEARCH"]',
        '    security_opt: ["no-new-privileges:true"]',
        "    read_only: true",
        *[f"    {key}: {j(value)}" for key, value in GATE_LIMITS.items()],
        '    restart: "unless-stopped"',
        f'    labels: {{"io.composegen.role": "edge-gate", "io.composegen.edge": {j(c.name)}}}',
        "networks:",
        "  default:",
        # `status` lists stacks; the edge's networks are not one
        '    labels: {"io.composegen.role": "edge"}',
        "  edge:",
        f"    name: {j(edge.network)}",
        # no route out: the stacks keep their own default network for downloads
        "    internal: true",
        '    labels: {"io.composegen.role": "edge"}',
        "volumes:",
        "  edge-data: {}",
        "  edge-config: {}",
        "  edge-sockets: {}",
    ]
    return "\n".join(lines) + "\n"


def stack_override(edge: Edge, name: str) -> str:
    """Compose override for a stack behind the edge: no published port, the private network under a
    stable alias. `up`, `down` and `logs` add it whenever this file exists."""
    j = json.dumps
    lines = [
        _header(edge).rstrip("\n"),
        f"# {name} behind the edge: no host port; the edge reaches it as {upstream_host(name)}.",
        "services:",
        "  vllm:",
        "    ports: !reset []",
        "    networks:",
        "      default: {}",
        f"      edge: {{aliases: [{j(upstream_host(name))}]}}",
        "networks:",
        "  edge:",
        f"    name: {j(edge.network)}",
        "    external: true",
    ]
    return "\n".join(lines) + "\n"


def _acme(email: str) -> list[str]:
    """ACME by TLS-ALPN-01 on the public listener: port 80 is not published (and not bindable: no
    caps)."""
    return [
        "\ttls {",
        "\t\tissuer acme {",
        f"\t\t\temail {email}",
        "\t\t\tdisable_http_challenge",
        "\t\t}",
        "\t}",
    ]


def _json_answer(status: int, body: str, indent: str = "\t\t") -> list[str]:
    """A Caddyfile answer in the OpenAI error shape (the gatekeeper's own answers are too)."""
    return [f"{indent}header Content-Type application/json", f"{indent}respond `{body}` {status}"]


def _timeouts(indent: str = "\t") -> str:
    """A client gets 10 s to send its headers; an idle kept-alive connection is closed after 2
    minutes. (No read_body: Go's whole-request read deadline would cut long streamed answers; the
    gatekeeper bounds a body's time itself.)"""
    inner = [PROTOCOLS, "timeouts {", "\tread_header 10s", "\tidle 2m", "}"]
    return "\n".join(
        [f"{indent}servers {{", *(f"{indent}\t{line}" for line in inner), f"{indent}}}"]
    )


PROTOCOLS = "protocols h1 h2"  # no HTTP/3: its UDP port is not published


def caddyfile(edge: Edge) -> str:
    c = edge.config
    tls = c.tls
    glob = [
        "{",
        # inside the container only: `caddy reload` goes through it (graceful)
        "\tadmin localhost:2019",
        "\tskip_install_trust",
        "\tauto_https disable_redirects",
        f"\thttps_port {HTTPS_PORT}",
        _timeouts(),
        f"\tdefault_sni {'127.0.0.1' if '127.0.0.1' in tls.names else tls.names[0]}",
        "}",
    ]
    if tls.mode == "off":
        site = [f"http://:{HTTPS_PORT} {{"]
    else:
        site = [", ".join(f"https://{n}" for n in tls.names) + " {"]
        site += ["\ttls internal"] if tls.mode == "internal" else _acme(tls.email or "")
    unavailable = (
        '{"error": {"message": "the edge\'s gatekeeper is not answering", "type": "unavailable", '
        '"param": null, "code": 503, "stage": "the edge\'s gatekeeper is not answering"}}'
    )
    site += [
        f"\t@allowed path {' '.join(ALLOWED_PATHS)}",
        "\thandle @allowed {",
        f"\t\treverse_proxy gate:{GATE_PORT} {{",
        "\t\t\tflush_interval -1",  # stream tokens as they come
        "\t\t}",
        "\t}",
        "\thandle {",  # whatever vLLM adds in a later release
        *_json_answer(404, NOT_FOUND),
        "\t}",
        "\thandle_errors {",  # the gatekeeper itself is gone: still an answer a client can wait on
        f"\t\theader Retry-After {c.retry_after}",
        *_json_answer(503, unavailable),
        "\t}",
        "}",
    ]
    metrics = [f"http://:{METRICS_PORT} {{", f"\tbind unix/{SOCKETS}/metrics.sock"]
    for name in edge.stacks:
        metrics += [
            f"\thandle /{name}/metrics {{",
            "\t\trewrite * /metrics",
            f"\t\treverse_proxy {upstream_host(name)}:{edge.stacks[name].profile.service.port.container}",
            "\t}",
        ]
    metrics += ["\thandle {", *_json_answer(404, NOT_FOUND), "\t}", "}"]
    operator: list[str] = []
    for name, r in edge.stacks.items():
        port = r.profile.service.port
        operator += [
            f"# {name}: the operator door (the door container serves it on 127.0.0.1:{port.host})",
            f"http://:{port.host} {{",
            f"\tbind unix/{SOCKETS}/door-{port.host}.sock",
            f"\t@dev path {' '.join(p + suffix for p in DEV_ROUTES for suffix in ('', '/*'))}",
            # vLLM's dev-mode routes (sleep, wake_up, collective_rpc...) stay inside
            "\thandle @dev {",
            *_json_answer(404, NOT_FOUND),
            "\t}",
            f"\treverse_proxy {upstream_host(name)}:{port.container}",
            "}",
        ]
    parts = ["\n".join(glob), "\n".join(site), "\n".join(metrics), "\n".join(operator)]
    return _header(edge) + "\n\n".join(parts) + "\n"


def door_caddyfile(edge: Edge) -> str:
    """The door: 127.0.0.1 listeners in the host's network namespace, each passed to its unix
    socket."""
    listeners = [(edge.config.metrics.port, "metrics.sock")]
    listeners += [
        (r.profile.service.port.host, f"door-{r.profile.service.port.host}.sock")
        for r in edge.stacks.values()
    ]
    glob = ["{", f"\tadmin {DOOR_ADMIN}", "\tauto_https off", _timeouts(), "}"]
    sites = [
        "\n".join(
            [
                f"http://:{port} {{",
                "\tbind 127.0.0.1",  # loopback of the host: nothing from another machine reaches it
                f"\treverse_proxy unix/{SOCKETS}/{sock} {{",
                "\t\theader_down -Server",  # one Server header (Caddy's), not vLLM's too
                "\t\tflush_interval -1",
                "\t}",
                "}",
            ]
        )
        for port, sock in listeners
    ]
    return _header(edge) + "\n\n".join(["\n".join(glob), *sites]) + "\n"
