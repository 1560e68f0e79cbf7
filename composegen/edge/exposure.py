"""The exposure gate (`gate NAME --exposure`): every route the stack's vLLM printed at startup
(`Route: PATH, Methods: M`), plus the ones that must never be reachable, tried from outside the
stack's network through the edge's public listener — once without a key, once with a throw-away
client key (the key is never written; its hash is removed afterwards). Passes when: without a key
every route is refused (401, 404; 400 from the proxy); with it, only allowlisted routes get past the
edge, every other one is 404.

Result (stable keys): {"edge", "url", "tls", "routes_from", "rows": [{"path", "method", "allowed",
"without_key", "with_key", "passed", "reason"}], "passed", "failed"} (reports.ExposureReport); it
goes into the evidence bundle as exposure.json — from `gate --exposure`, `evidence --exposure`, and
`qualify` (criterion `exposure`) whenever edge.yaml fronts the stack.
"""

from __future__ import annotations

import functools
import http.client
import json
import re
import secrets
import ssl
import tempfile
from collections.abc import Callable, Mapping
from urllib.parse import urlsplit

from composegen.edge import config, keys, routes, service
from composegen.edge.config import Edge
from composegen.edge.render import ALLOWED_PATHS
from composegen.edge.reports import ExposureReport, ExposureRow
from composegen.errors import CheckFailed
from composegen.profiles.resolved import Resolved
from composegen.project import Project
from composegen.stack import driver

ROUTE_LINE = re.compile(r"Route: (/\S*), Methods: ([A-Z, ]+)\s*$", re.M)
MUST_BE_CLOSED = [
    ("/metrics", "GET"),
    ("/invocations", "POST"),
    ("/tokenize", "POST"),
    ("/scale_elastic_ep", "POST"),
]
MAX_ROUTES = 400
TIMEOUT_S = 30.0
GATE_CLIENT = "exposure-gate"


def printed_routes(log_text: str) -> list[tuple[str, str]]:
    """(path, method) pairs of the startup route list, in order, without duplicates (bounded)."""
    pairs: list[tuple[str, str]] = []
    for path, methods in ROUTE_LINE.findall(log_text):
        for method in (m.strip() for m in methods.split(",")):
            if method and (path, method) not in pairs and len(pairs) < MAX_ROUTES:
                pairs.append((path[:300], method))
    return pairs


def allowed(path: str) -> bool:
    exact = {p for p in ALLOWED_PATHS if not p.endswith("/*")}
    prefixes = [p[:-1] for p in ALLOWED_PATHS if p.endswith("/*")]
    return path in exact or any(path.startswith(p) for p in prefixes)


def run(project: Project, edge: Edge, name: str, log_text: str) -> ExposureReport:
    pairs = printed_routes(log_text)
    pairs += [extra for extra in MUST_BE_CLOSED if extra not in pairs]
    alias = next((a for a, p in routes.aliases(project, edge).items() if p == name), None)
    client = f"{GATE_CLIENT}-{secrets.token_hex(4)}"
    key = keys.add(project, client)
    try:
        context = _tls_context(project, edge)
        rows = [_row(edge, context, path, method, key, alias) for path, method in pairs]
    finally:
        keys.remove(project, client)
    failed = sum(not r.passed for r in rows)
    return ExposureReport(
        edge=edge.config.name,
        url=edge.url,
        tls=edge.config.tls.mode,
        routes_from="the stack's startup log" if printed_routes(log_text) else "none printed",
        rows=rows,
        passed=failed == 0,
        failed=failed,
    )


def for_stack(project: Project, r: Resolved) -> ExposureReport:
    """The exposure gate's result for a stack behind the edge (CheckFailed when it is not)."""
    edge = service.load(project)
    if r.name not in edge.stacks:
        msg = f"{r.name} is not behind the edge (edge.yaml stacks: {', '.join(edge.stacks)})"
        raise CheckFailed(msg)
    return run(project, edge, r.name, driver.logs_text(project, r))


def gate_for(project: Project, r: Resolved) -> Callable[[], ExposureReport] | None:
    """`qualify`'s exposure criterion: the gate when an edge fronts this stack, else None."""
    if not config.configured(project) or r.name not in service.load(project).stacks:
        return None
    return functools.partial(for_stack, project, r)


def _tls_context(project: Project, edge: Edge) -> ssl.SSLContext | None:
    if edge.scheme == "http":
        return None
    if edge.config.tls.mode != "internal":
        return ssl.create_default_context()
    # the edge's own root, as a client trusts it
    with tempfile.NamedTemporaryFile("w", suffix=".crt") as fh:
        fh.write(service.root_certificate(project))
        fh.flush()
        return ssl.create_default_context(cafile=fh.name)


def _row(
    edge: Edge, context: ssl.SSLContext | None, path: str, method: str, key: str, alias: str | None
) -> ExposureRow:
    url_path = re.sub(r"\{[^}/]*\}", "composegen-probe", path)
    body = None
    if method == "POST":
        chat = {"model": alias or "none", "messages": [{"role": "user", "content": "hi"}]}
        body = {**chat, "max_tokens": 1}
        if path in ("/v1/completions", "/v1/responses"):
            body |= {"prompt": "hi", "input": "hi"}
    without = _status(edge, context, method, url_path, None, body)
    with_key = _status(edge, context, method, url_path, key, body)
    ok_path = allowed(path)
    reasons = []
    if without not in (400, 401, 404):  # refused; 400: the proxy rejected the request itself
        reasons.append(f"without a key: {without}")
    if ok_path and with_key in (401, 403):
        reasons.append(f"allowlisted, yet {with_key} with a key")
    if not ok_path and with_key != 404:
        reasons.append(f"not allowlisted, yet {with_key} with a key")
    return ExposureRow(
        path=path,
        method=method,
        allowed=ok_path,
        without_key=without,
        with_key=with_key,
        passed=not reasons,
        reason="; ".join(reasons) or None,
    )


def _status(
    edge: Edge,
    context: ssl.SSLContext | None,
    method: str,
    path: str,
    key: str | None,
    body: Mapping[str, object] | None,  # a request body sent as JSON
) -> int:
    """The status of one request (-1: no HTTP answer); the body is read (bounded) and dropped."""
    parts = urlsplit(edge.url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 443
    if context is None:
        conn: http.client.HTTPConnection = http.client.HTTPConnection(host, port, timeout=TIMEOUT_S)
    else:
        conn = http.client.HTTPSConnection(host, port, timeout=TIMEOUT_S, context=context)
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    try:
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        resp.read(1 << 20)
        return resp.status
    except (OSError, http.client.HTTPException):
        return -1
    finally:
        conn.close()


def format_text(result: ExposureReport) -> str:
    lines = [f"exposure through {result.url} (tls {result.tls}), routes from {result.routes_from}:"]
    for row in result.rows:
        mark = "ok  " if row.passed else "FAIL"
        where = "allowlisted" if row.allowed else "closed"
        line = f"  {mark} {row.method:<6} {row.path:<40} {where:<11} no key {row.without_key}"
        lines.append(line + f", key {row.with_key}" + (f"  ({row.reason})" if row.reason else ""))
    lines.append(f"{len(result.rows) - result.failed}/{len(result.rows)} routes as expected")
    return "\n".join(lines)
