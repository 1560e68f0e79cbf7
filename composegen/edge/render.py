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
accepts forwarded packets to the container's address). The door passes only DOOR_PATHS.
"""

from __future__ import annotations

import ast
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
# the gatekeeper's parts, in the order the one file the gate runs joins them (its door last)
GATE_PARTS = ("gate_rules", "gate_upstream", "gate_framing", "gatekeeper")
# the volume the proxy and the door share: one unix socket per loopback listener
SOCKETS = "/run/edge"
# the door shares the host's network: its admin API is a socket
DOOR_ADMIN = "unix//tmp/caddy-admin.sock"
# the gatekeeper's threads and buffers, bounded
GATE_LIMITS = {"mem_limit": "512m", "pids_limit": 1024}
# The operator door's allowlist: the public one and what composegen's own commands read there (top's and
# status' /metrics, the ladder's /tokenize); every other path — vLLM's dev-mode routes (/sleep, /wake_up,
# /collective_rpc, …) in any spelling, and whatever a later vLLM adds — is 404. Caddy matches the
# decoded, cleaned path, case-insensitively, so `/sl%65ep`, `/sleep%0a` or `/v1/models/../sleep` match
# no entry.
DOOR_PATHS = (*ALLOWED_PATHS, "/metrics", "/tokenize", "/detokenize", "/version", "/ping", "/load")
NOT_FOUND = '{"error": {"message": "not found", "type": "not_found", "param": null, "code": 404}}'


def render_edge(edge: Edge) -> dict[str, str]:
    """{out/ key: text}: "edge" is out/edge/compose.yaml, the others are paths under out/."""
    files = {
        "edge": compose_text(edge),
        "edge/Caddyfile": caddyfile(edge),
        "edge/door.Caddyfile": door_caddyfile(edge),
        "edge/gatekeeper.py": gatekeeper_text(),
    }
    files.update({f"edge/stacks/{n}.yaml": stack_override(edge, n) for n in edge.stacks})
    return files


def _header(edge: Edge, comment: str = "#") -> str:
    source = edge.path
    return (
        f"{comment} {GENERATED_HEADER[2:]}{source}. "
        f"Do not edit: change {source} and run `composegen render`.\n"
    )


def _gate_part(name: str, imports: dict[str, set[str]]) -> str:
    """A part's text without its docstring, `from __future__` and imports; its stdlib imports go
    into IMPORTS ({module: names}, "" for a plain `import module`)."""
    source = Path(__file__).with_name(f"{name}.py").read_text(encoding="utf-8")
    lines = source.splitlines()
    for node in ast.parse(source).body:
        end = node.end_lineno or node.lineno
        if isinstance(node, ast.Import):
            imports.setdefault("", set()).update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            if not node.module.startswith(("composegen", "__future__")):
                imports.setdefault(node.module, set()).update(a.name for a in node.names)
        elif not (node.lineno == 1 and isinstance(node, ast.Expr)):  # the docstring
            continue
        lines[node.lineno - 1 : end] = [""] * (end - node.lineno + 1)
    return "\n".join(lines).strip("\n")


def gatekeeper_text() -> str:
    """The gate's one stdlib file (the edge mounts it; `python3 -I` runs it): gatekeeper.py's
    docstring, every part's imports once, then the parts."""
    door = Path(__file__).with_name("gatekeeper.py").read_text(encoding="utf-8")
    imports: dict[str, set[str]] = {}
    bodies = [_gate_part(name, imports) for name in GATE_PARTS]
    lines = [f"import {name}" for name in sorted(imports.pop("", set()))]
    lines += [f"from {m} import {', '.join(sorted(names))}" for m, names in sorted(imports.items())]
    docstring = ast.get_docstring(ast.parse(door), clean=False) or ""
    head = (
        f"{GENERATED_HEADER}composegen/edge/{{{','.join(GATE_PARTS)}}}.py joined (do not edit).\n"
    )
    parts = [f'{head}"""{docstring}"""\n\nfrom __future__ import annotations', "\n".join(lines)]
    return "\n\n\n".join([*parts, *bodies]) + "\n"


HARDENED = (
    '    cap_drop: ["ALL"]',
    '    security_opt: ["no-new-privileges:true"]',
    "    read_only: true",
)


def _labels(edge: Edge, role: str) -> str:
    return f'    labels: {{"io.composegen.role": "{role}", "io.composegen.edge": {json.dumps(edge.config.name)}}}'


def _caddy_service(edge: Edge, name: str, config: str) -> list[str]:
    """The proxy or the door: the same image, each with its own Caddyfile."""
    return [
        f"  {name}:",
        f"    image: {json.dumps(edge.config.images.proxy)}",
        f'    command: ["caddy", "run", "--config", "/etc/caddy/{config}", "--adapter", "caddyfile"]',
    ]


def _proxy_service(edge: Edge) -> list[str]:
    c = edge.config
    bind = f"[{c.listen.bind}]" if ":" in c.listen.bind else c.listen.bind  # compose's IPv6 form
    return [
        *_caddy_service(edge, "proxy", "Caddyfile"),
        "    ports:",
        f"      - {json.dumps(f'{bind}:{c.listen.port}:{HTTPS_PORT}')}",  # the only published port
        "    volumes:",
        # the directory, not the file: a rename-replaced Caddyfile is seen on reload
        '      - ".:/etc/caddy:ro"',
        '      - "edge-data:/data"',  # the internal CA and certificates live here
        '      - "edge-config:/config"',
        f'      - "edge-sockets:{SOCKETS}"',
        '    environment: {"XDG_DATA_HOME": "/data", "XDG_CONFIG_HOME": "/config"}',
        "    networks: [default, edge]",
        *HARDENED,
        '    tmpfs: ["/tmp"]',
        '    restart: "unless-stopped"',
        _labels(edge, "edge-proxy"),
    ]


def _door_service(edge: Edge) -> list[str]:
    """The loopback listeners: the host's network namespace, 127.0.0.1 only."""
    return [
        *_caddy_service(edge, "door", "door.Caddyfile"),
        '    network_mode: "host"',
        "    volumes:",
        '      - ".:/etc/caddy:ro"',
        f'      - "edge-sockets:{SOCKETS}"',
        '    environment: {"XDG_DATA_HOME": "/tmp/data", "XDG_CONFIG_HOME": "/tmp/config"}',
        *HARDENED,
        '    tmpfs: ["/tmp"]',
        '    restart: "unless-stopped"',
        "    depends_on: [proxy]",
        _labels(edge, "edge-door"),
    ]


def _gate_service(edge: Edge) -> list[str]:
    return [
        "  gate:",
        f"    image: {json.dumps(edge.config.images.gate)}",
        f'    command: ["python3", "-I", "/gate/gatekeeper.py", "--state", "/state", "--port", "{GATE_PORT}"]',
        "    volumes:",
        '      - "./gatekeeper.py:/gate/gatekeeper.py:ro"',
        # keys (hashes) and routes: re-read when they change
        '      - "../../.composegen/edge:/state:ro"',
        "    networks: [edge]",
        '    cap_drop: ["ALL"]',
        # read the 0600 state files whoever owns them on the host
        '    cap_add: ["DAC_READ_SEARCH"]',
        *HARDENED[1:],
        *[f"    {key}: {json.dumps(value)}" for key, value in GATE_LIMITS.items()],
        '    restart: "unless-stopped"',
        _labels(edge, "edge-gate"),
    ]


def compose_text(edge: Edge) -> str:
    role = '    labels: {"io.composegen.role": "edge"}'  # `status` lists stacks; these are not one
    lines = [
        _header(edge).rstrip("\n"),
        f"# tls: {edge.config.tls.mode}  stacks: {', '.join(edge.stacks)}",
        f"name: {json.dumps(edge.project_name)}",
        "services:",
        *_proxy_service(edge),
        *_door_service(edge),
        *_gate_service(edge),
        "networks:",
        "  default:",
        role,
        "  edge:",
        f"    name: {json.dumps(edge.network)}",
        # no route out: the stacks keep their own default network for downloads
        "    internal: true",
        role,
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


UNAVAILABLE = (
    '{"error": {"message": "the edge\'s gatekeeper is not answering", "type": "unavailable", '
    '"param": null, "code": 503, "stage": "the edge\'s gatekeeper is not answering"}}'
)


def gate_proxy(upstream: str, indent: str = "\t\t") -> list[str]:
    """The proxy's hop to the gatekeeper. No `flush_interval -1`: Caddy 2.6 (caddy#4952) then lets a
    round trip outlive its client, so a non-streamed request whose client hung up ran to its end
    (issue 48). Without it Caddy still flushes at once what streams: text/event-stream, or an answer
    of unknown length (the gatekeeper relays every stream chunked)."""
    return [f"{indent}reverse_proxy {upstream}"]


def _proxy_globals(edge: Edge) -> str:
    names = edge.config.tls.names
    return "\n".join(
        [
            "{",
            # inside the container only: `caddy reload` goes through it (graceful)
            "\tadmin localhost:2019",
            "\tskip_install_trust",
            "\tauto_https disable_redirects",
            f"\thttps_port {HTTPS_PORT}",
            _timeouts(),
            f"\tdefault_sni {'127.0.0.1' if '127.0.0.1' in names else names[0]}",
            "}",
        ]
    )


def _public_site(edge: Edge) -> str:
    tls = edge.config.tls
    if tls.mode == "off":
        site = [f"http://:{HTTPS_PORT} {{"]
    else:
        site = [", ".join(f"https://{n}" for n in tls.names) + " {"]
        # ACME by TLS-ALPN-01 on the public listener: port 80 is not published (nor bindable)
        acme = ["\ttls {", "\t\tissuer acme {", f"\t\t\temail {tls.email or ''}"]
        acme += ["\t\t\tdisable_http_challenge", "\t\t}", "\t}"]
        site += ["\ttls internal"] if tls.mode == "internal" else acme
    site += [
        f"\t@allowed path {' '.join(ALLOWED_PATHS)}",
        "\thandle @allowed {",
        *gate_proxy(f"gate:{GATE_PORT}"),
        "\t}",
        "\thandle {",  # whatever vLLM adds in a later release
        *_json_answer(404, NOT_FOUND),
        "\t}",
        "\thandle_errors {",  # the gatekeeper itself is gone: still an answer a client can wait on
        f"\t\theader Retry-After {edge.config.retry_after}",
        *_json_answer(503, UNAVAILABLE),
        "\t}",
        "}",
    ]
    return "\n".join(site)


def _metrics_site(edge: Edge) -> str:
    metrics = [f"http://:{METRICS_PORT} {{", f"\tbind unix/{SOCKETS}/metrics.sock"]
    for name in edge.stacks:
        metrics += [
            f"\thandle /{name}/metrics {{",
            "\t\trewrite * /metrics",
            f"\t\treverse_proxy {upstream_host(name)}:{edge.stacks[name].profile.service.port.container}",
            "\t}",
        ]
    return "\n".join([*metrics, "\thandle {", *_json_answer(404, NOT_FOUND), "\t}", "}"])


def operator_site(listen: list[str], upstream: str) -> list[str]:
    """An operator door: DOOR_PATHS passed to the stack, everything else 404."""
    return [
        *listen,
        f"\t@served path {' '.join(DOOR_PATHS)}",
        "\thandle @served {",
        f"\t\treverse_proxy {upstream}",
        "\t}",
        "\thandle {",
        *_json_answer(404, NOT_FOUND),
        "\t}",
        "}",
    ]


def caddyfile(edge: Edge) -> str:
    operator: list[str] = []
    for name, r in edge.stacks.items():
        port = r.profile.service.port
        listen = [
            f"# {name}: the operator door (the door container serves it on 127.0.0.1:{port.host})",
            f"http://:{port.host} {{",
            f"\tbind unix/{SOCKETS}/door-{port.host}.sock",
        ]
        operator += operator_site(listen, f"{upstream_host(name)}:{port.container}")
    parts = [_proxy_globals(edge), _public_site(edge), _metrics_site(edge), "\n".join(operator)]
    return _header(edge) + "\n\n".join(parts) + "\n"


def door_caddyfile(edge: Edge) -> str:
    """The door: 127.0.0.1 listeners in the host's network namespace, each to its unix socket."""
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
                "\t}",
                "}",
            ]
        )
        for port, sock in listeners
    ]
    return _header(edge) + "\n\n".join(["\n".join(glob), *sites]) + "\n"
