"""out/edge/: the edge's compose file, its Caddyfile, the gatekeeper it runs, and one override per stack
behind it (joins the edge's private network, publishes no host port). Deterministic text from edge.yaml
and the profiles; `composegen render` writes it and `render --check` proves it fresh.

Traffic: client → proxy (Caddy: TLS, the route allowlist, everything else 404) → gate (gatekeeper.py:
per-client keys by hash, alias → stack, 503 while a switch runs) → stack-NAME:PORT on the private network.
The proxy also listens on loopback only: /NAME/metrics for Prometheus and, on each stack's own host port,
the operator door composegen's up/wait/gates/bench/top use (what vLLM itself published before).
"""

from __future__ import annotations

import json
from pathlib import Path

from composegen.edge.config import Edge, upstream_host
from composegen.render import GENERATED_HEADER

ALLOWED_PATHS = ("/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/responses/*", "/v1/models", "/health")
HTTPS_PORT = 8443  # inside the proxy container: unprivileged, so it needs no capability
METRICS_PORT = 9090
GATE_PORT = 8080
GATE_SOURCE = Path(__file__).with_name("gatekeeper.py")


def stack_key(name: str) -> str:
    return f"edge/stacks/{name}.yaml"


def render_edge(edge: Edge) -> dict[str, str]:
    """{out/ key: text}: "edge" is out/edge/compose.yaml, the others are paths under out/."""
    files = {
        "edge": compose_text(edge),
        "edge/Caddyfile": caddyfile(edge),
        "edge/gatekeeper.py": gatekeeper_text(),
    }
    files.update({stack_key(name): stack_override(edge, name) for name in edge.stacks})
    return files


def _header(edge: Edge, comment: str = "#") -> str:
    return (
        f"{comment} {GENERATED_HEADER[2:]}{edge.path}. Do not edit: change {edge.path} and run `composegen render`.\n"
    )


def gatekeeper_text() -> str:
    source = GATE_SOURCE.read_text(encoding="utf-8")
    return f"{GENERATED_HEADER}composegen/edge/gatekeeper.py (a copy the edge mounts; do not edit).\n{source}"


def compose_text(edge: Edge) -> str:
    c = edge.config
    ports = [f"{c.listen.bind}:{c.listen.port}:{HTTPS_PORT}", f"127.0.0.1:{c.metrics.port}:{METRICS_PORT}"]
    ports += [f"127.0.0.1:{r.profile.service.port.host}:{r.profile.service.port.host}" for r in edge.stacks.values()]
    j = json.dumps
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
        '      - ".:/etc/caddy:ro"',  # the directory, not the file: a rename-replaced Caddyfile is seen on reload
        '      - "edge-data:/data"',  # the internal CA and certificates live here
        '      - "edge-config:/config"',
        '    environment: {"XDG_DATA_HOME": "/data", "XDG_CONFIG_HOME": "/config"}',
        "    networks: [default, edge]",
        '    cap_drop: ["ALL"]',
        '    security_opt: ["no-new-privileges:true"]',
        "    read_only: true",
        '    tmpfs: ["/tmp"]',
        '    restart: "unless-stopped"',
        f'    labels: {{"io.composegen.role": "edge-proxy", "io.composegen.edge": {j(c.name)}}}',
        "  gate:",
        f"    image: {j(c.images.gate)}",
        f'    command: ["python3", "-I", "/gate/gatekeeper.py", "--state", "/state", "--port", "{GATE_PORT}"]',
        "    volumes:",
        '      - "./gatekeeper.py:/gate/gatekeeper.py:ro"',
        '      - "../../.composegen/edge:/state:ro"',  # keys (hashes) and routes: re-read when they change
        "    networks: [edge]",
        '    cap_drop: ["ALL"]',
        '    cap_add: ["DAC_READ_SEARCH"]',  # read the 0600 state files whoever owns them on the host
        '    security_opt: ["no-new-privileges:true"]',
        "    read_only: true",
        '    restart: "unless-stopped"',
        f'    labels: {{"io.composegen.role": "edge-gate", "io.composegen.edge": {j(c.name)}}}',
        "networks:",
        "  default:",
        '    labels: {"io.composegen.role": "edge"}',  # `status` lists stacks; the edge's networks are not one
        "  edge:",
        f"    name: {j(edge.network)}",
        "    internal: true",  # no route out: the stacks keep their own default network for downloads
        '    labels: {"io.composegen.role": "edge"}',
        "volumes:",
        "  edge-data: {}",
        "  edge-config: {}",
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
    """ACME by TLS-ALPN-01 on the public listener: port 80 is not published (and not bindable: no caps)."""
    return [
        "\ttls {",
        "\t\tissuer acme {",
        f"\t\t\temail {email}",
        "\t\t\tdisable_http_challenge",
        "\t\t}",
        "\t}",
    ]


def caddyfile(edge: Edge) -> str:
    c = edge.config
    tls = c.tls
    glob = [
        "{",
        "\tadmin localhost:2019",  # inside the container only: `caddy reload` goes through it (graceful)
        "\tskip_install_trust",
        "\tauto_https disable_redirects",
        f"\thttps_port {HTTPS_PORT}",
        "\tservers {\n\t\tprotocols h1 h2\n\t}",  # no HTTP/3: its UDP port is not published
        f"\tdefault_sni {'127.0.0.1' if '127.0.0.1' in tls.names else tls.names[0]}",
    ]
    glob.append("}")
    if tls.mode == "off":
        site = [f"http://:{HTTPS_PORT} {{"]
    else:
        site = [", ".join(f"https://{n}" for n in tls.names) + " {"]
        site += ["\ttls internal"] if tls.mode == "internal" else _acme(tls.email or "")
    site += [
        f"\t@allowed path {' '.join(ALLOWED_PATHS)}",
        "\thandle @allowed {",
        f"\t\treverse_proxy gate:{GATE_PORT} {{",
        "\t\t\tflush_interval -1",  # stream tokens as they come
        "\t\t}",
        "\t}",
        "\thandle {",
        '\t\trespond "not found" 404',  # whatever vLLM adds in a later release
        "\t}",
        "\thandle_errors {",  # the gatekeeper itself is gone: still an answer a client can wait on
        f"\t\theader Retry-After {c.retry_after}",
        '\t\trespond "the edge\'s gatekeeper is not answering" 503',
        "\t}",
        "}",
    ]
    metrics = [f"http://:{METRICS_PORT} {{"]
    for name in edge.stacks:
        metrics += [
            f"\thandle /{name}/metrics {{",
            "\t\trewrite * /metrics",
            f"\t\treverse_proxy {upstream_host(name)}:{edge.stacks[name].profile.service.port.container}",
            "\t}",
        ]
    metrics += ['\thandle {\n\t\trespond "not found" 404\n\t}', "}"]
    operator: list[str] = []
    for name, r in edge.stacks.items():
        port = r.profile.service.port
        operator += [
            f"# {name}: the operator door (published on 127.0.0.1 only)",
            f"http://:{port.host} {{",
            f"\treverse_proxy {upstream_host(name)}:{port.container}",
            "}",
        ]
    parts = ["\n".join(glob), "\n".join(site), "\n".join(metrics), "\n".join(operator)]
    return _header(edge) + "\n\n".join(parts) + "\n"
