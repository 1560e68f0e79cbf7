"""The edge on the real engine, with Debian's real Caddy in front of the emulated vLLM: TLS verified by real
HTTPS clients against the internal CA, keys added/used/rotated/revoked/expired with no vLLM restart, and
every route the recorded vLLM 0.26.0 printed at startup tried through the edge."""

from __future__ import annotations

import json
import re
import shutil
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.support.edge import EdgeProject, edge_project, serving
from tests.support.helpers import run_cli

pytestmark = pytest.mark.docker
DATA = Path(__file__).resolve().parents[1] / "data" / "real-0.26.0-h200-apikey-routes"
ALLOWED = {"/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/models", "/health"}
CHAT = {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 4}


@pytest.fixture(scope="module")
def edge(tmp_path_factory, edge_img) -> EdgeProject:
    with serving(edge_project(tmp_path_factory.mktemp("edge"), edge_img)) as project:
        yield project


def recorded_routes() -> list[tuple[str, str]]:
    """(path, method) of every `Route: PATH, Methods: M` line the real server printed at startup."""
    text = (DATA / "serve-apikey-two-names-eager.log").read_text(encoding="utf-8")
    pairs = []
    for path, methods in re.findall(r"Route: (\S+), Methods: ([A-Z, ]+)$", text, re.M):
        pairs += [(path, m.strip()) for m in methods.split(",")]
    return pairs


def allowed(path: str) -> bool:
    return path in ALLOWED or path.startswith("/v1/responses/")


def test_tls_is_verified_against_the_internal_ca(edge):
    key = edge.ok("edge", "keys", "add", "tls-client").strip()
    pem = edge.ca_file().read_text()
    assert pem.startswith("-----BEGIN CERTIFICATE-----")
    # python's ssl, CERT_REQUIRED + hostname check
    status, _, body = edge.request("GET", "/v1/models", key)
    assert status == 200 and json.loads(body)["data"][0]["id"] == "ds4-flash"
    # the system roots do not know it
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        urllib.request.urlopen(
            edge.url + "/health", timeout=10, context=ssl.create_default_context()
        )
    raw = socket.create_connection(("127.0.0.1", edge.port), timeout=10)
    # the name on the certificate
    with edge.context().wrap_socket(raw, server_hostname="localhost") as tls:
        assert tls.version() in ("TLSv1.2", "TLSv1.3")
        names = {v for _, v in tls.getpeercert()["subjectAltName"]}
        assert "localhost" in names
    if shutil.which("curl"):  # a second, independent HTTPS client
        proc = subprocess.run(
            ["curl", "-sS", "--cacert", str(edge.ca_file()), "-H", f"Authorization: Bearer {key}",
             "-o", "/dev/null", "-w", "%{http_code} %{ssl_verify_result}", f"{edge.url}/health"],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        assert proc.stdout == "200 0", proc.stderr
    plain = urllib.request.Request(f"http://127.0.0.1:{edge.port}/health")
    # no plain HTTP on the TLS port
    with pytest.raises((urllib.error.URLError, ConnectionError, http_error())):
        urllib.request.urlopen(plain, timeout=10).read()


def http_error():
    import http.client

    return http.client.HTTPException


def test_keys_added_used_rotated_revoked_expired_without_a_vllm_restart(edge):
    started = edge.container_started(edge.old)
    body = {**CHAT, "model": "ds4-flash"}
    add = edge.cli("edge", "keys", "add", "alice")
    assert add.returncode == 0 and "shown only now" in add.stderr
    key = add.stdout.strip()
    assert key.startswith("cgk_") and len(key) > 40
    status, _, answer = edge.request("POST", "/v1/chat/completions", key, body)
    assert status == 200 and json.loads(answer)["model"] == f"{edge.old}-served"
    assert edge.request("POST", "/v1/chat/completions", None, body)[0] == 401
    assert edge.request("POST", "/v1/chat/completions", key[:-2] + "xx", body)[0] == 401
    assert edge.request("POST", "/v1/chat/completions", "", body)[0] == 401

    rotated = edge.ok("edge", "keys", "rotate", "alice").strip()
    assert rotated != key
    # at once: no reload to wait for
    assert edge.request("POST", "/v1/chat/completions", key, body)[0] == 401
    assert edge.request("POST", "/v1/chat/completions", rotated, body)[0] == 200
    took = time.monotonic()
    edge.ok("edge", "keys", "revoke", "alice")
    # one CLI run on this machine now: the expiry must outlast the next one
    took = time.monotonic() - took
    assert edge.request("POST", "/v1/chat/completions", rotated, body)[0] == 401

    soon = (datetime.now(UTC) + timedelta(seconds=4 + 3 * took)).strftime("%Y-%m-%dT%H:%M:%SZ")
    short = edge.ok("edge", "keys", "add", "bob", "--expires", soon).strip()
    assert edge.request("GET", "/v1/models", short)[0] == 200
    time.sleep(max(0.0, (datetime.fromisoformat(soon) - datetime.now(UTC)).total_seconds()) + 0.5)
    assert edge.request("GET", "/v1/models", short)[0] == 401

    assert edge.container_started(edge.old) == started  # vLLM never restarted
    listing = edge.ok("edge", "keys", "list", "--json")
    states = {c["name"]: c["state"] for c in json.loads(listing)["clients"]}
    assert states["alice"] == "revoked" and states["bob"] == "expired"
    log = edge.gate_log()
    assert re.search(r'client=alice "POST /v1/chat/completions" 200', log)
    assert 'client=- "POST /v1/chat/completions" 401' in log
    for secret in (key, rotated, short):
        assert secret not in listing and secret not in log
        files = [p for p in edge.root.rglob("*") if p.is_file()]
        assert any(p.name == "keys.json" for p in files), files  # never an empty loop
        for path in files:
            assert secret.encode() not in path.read_bytes(), f"{path} holds a key"
    keys_file = edge.root / ".composegen" / "edge" / "keys.json"
    assert keys_file.stat().st_mode & 0o777 == 0o600
    assert (keys_file.parent.stat().st_mode & 0o777) == 0o700


def test_every_recorded_route_through_the_edge(edge):
    key = edge.ok("edge", "keys", "add", "routes").strip()
    matrix = json.loads((DATA / "exposure-matrix.json").read_text())
    recorded = {(row["path"], row["method"], row["auth"]): row["status"] for row in matrix}
    routes = recorded_routes()
    # 30 lines: /ping is printed twice
    assert len(routes) == 34 and len({p for p, _ in routes}) == 29
    bodies = {
        "/v1/chat/completions": {**CHAT, "model": "ds4-flash"},
        "/v1/completions": {"model": "ds4-flash", "prompt": "hi", "max_tokens": 4},
        "/v1/responses": {"model": "ds4-flash", "input": "hi", "max_output_tokens": 4},
    }
    opened = []
    for path, method in routes:
        url = path.replace("{response_id}", "resp_0123")
        without = edge.request(method, url, None, bodies.get(path))[0]
        with_key = edge.request(method, url, key, bodies.get(path))[0]
        if allowed(path):
            assert without == 401, (path, method)
            # what the real vLLM answered with its key (the recorded matrix) is what the edge passes on
            assert with_key == recorded[(path, method, True)], (path, method, with_key)
        else:
            assert (without, with_key) == (404, 404), (path, method)
            if recorded[(path, method, False)] < 400 or path == "/scale_elastic_ep":
                opened.append(path)  # reachable without a key on vLLM itself; closed at the edge
    assert {
        "/invocations",
        "/generative_scoring",
        "/metrics",
        "/tokenize",
        "/scale_elastic_ep",
    } <= set(opened)
    for sneaky in ("/v1/responses/../../invocations", "/v1/responses/%2e%2e/tokenize", "/v1/models/../metrics",
                   "/v1/responses//metrics", "/V1/MODELS/../../metrics"):  # fmt: skip
        assert edge.request("GET", sneaky, key)[0] in (400, 404), sneaky
        assert edge.request("POST", sneaky, key, bodies["/v1/chat/completions"])[0] in (400, 404), (
            sneaky
        )
    with urllib.request.urlopen(
        f"http://127.0.0.1:{edge.metrics_port}/{edge.old}/metrics", timeout=10
    ) as resp:
        assert resp.status == 200 and b"vllm:" in resp.read()  # Prometheus' loopback listener


def test_the_stack_behind_the_edge_publishes_no_port(edge):
    # its own client: no test relies on another's having run first
    edge.ok("edge", "keys", "add", "status-client")
    info = json.loads(
        subprocess.check_output(["docker", "inspect", f"composegen-{edge.old}-vllm-1"])
    )[0]
    assert not any(
        info["NetworkSettings"]["Ports"].get(p) for p in info["NetworkSettings"]["Ports"]
    )
    assert f"composegen-{edge.name}-net" in info["NetworkSettings"]["Networks"]
    text = edge.ok("status")
    assert (
        f"edge {edge.name}: {edge.url} (tls internal)" in text
        and "gate running" in text
        and "proxy running" in text
    )
    assert f"alias ds4-flash → {edge.old}" in text
    report = json.loads(edge.ok("edge", "status", "--json"))
    assert report["tls"] == "internal" and report["stacks"] == [edge.old, edge.new]
    assert [(a["alias"], a["profile"], a["switching"]) for a in report["aliases"]] == [
        ("ds4-flash", edge.old, None)
    ]
    # the stack the alias points at, as `status` sees it
    assert report["aliases"][0]["target"] == "ready"
    assert {c["name"] for c in report["clients"]} >= {"status-client"}
    assert "cgk_" not in text and "cgk_" not in json.dumps(report)


def test_the_exposure_gate_tries_every_printed_route_and_keeps_the_matrix(edge):
    res = edge.cli("gate", edge.old, "--exposure", "--json")
    assert res.returncode == 0, str([r for r in json.loads(res.stdout)["rows"] if not r["passed"]])
    result = json.loads(res.stdout)
    rows = {(r["path"], r["method"]): r for r in result["rows"]}
    assert result["passed"] and result["routes_from"] == "the stack's startup log"
    assert {
        ("/v1/models", "GET"),
        ("/tokenize", "POST"),
        ("/metrics", "GET"),
        ("/invocations", "POST"),
    } <= set(rows)
    assert (
        rows[("/v1/models", "GET")]["with_key"] == 200
        and rows[("/v1/models", "GET")]["without_key"] == 401
    )
    assert rows[("/v1/chat/completions", "POST")]["with_key"] == 200
    for closed in [
        ("/metrics", "GET"),
        ("/invocations", "POST"),
        ("/tokenize", "POST"),
        ("/scale_elastic_ep", "POST"),
    ]:
        assert (rows[closed]["without_key"], rows[closed]["with_key"]) == (404, 404), closed
    run = edge.root / result["run"]
    assert json.loads((run / "exposure.json").read_text())["rows"] == result["rows"]
    evidence = json.loads((run / "evidence.json").read_text())
    assert "exposure.json" in {f["file"] for f in evidence["raw"]}
    clients = json.loads(edge.ok("edge", "keys", "list", "--json"))["clients"]
    # its key is gone with it
    assert not any(c["name"].startswith("exposure-gate") for c in clients)
    assert "Bearer" not in "".join(p.read_text() for p in run.iterdir())


def test_evidence_exposure_puts_the_matrix_in_its_bundle(edge):
    res = edge.cli("evidence", edge.old, "--exposure", "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    run = edge.root / doc["path"]
    matrix = json.loads((run / "exposure.json").read_text())
    assert matrix["passed"] and {r["path"] for r in matrix["rows"]} >= {
        "/invocations",
        "/metrics",
        "/v1/models",
    }
    assert "exposure.json" in {f["file"] for f in doc["evidence"]["raw"]}


def test_without_its_gatekeeper_the_edge_answers_503_with_retry_after_and_logs_no_key(edge):
    key = edge.ok("edge", "keys", "add", "late").strip()
    edge.ca_file()
    subprocess.run(
        ["docker", "stop", "-t", "1", f"composegen-{edge.name}-gate-1"],
        capture_output=True,
        timeout=60,
    )
    try:
        status, headers, _ = edge.request("GET", "/v1/models", key)
        assert status == 503 and headers.get("Retry-After") == "1"
        proxy = subprocess.run(
            ["docker", "logs", f"composegen-{edge.name}-proxy-1"], capture_output=True, text=True
        )
        assert key not in proxy.stdout + proxy.stderr  # Caddy's error log redacts Authorization
    finally:
        subprocess.run(
            ["docker", "start", f"composegen-{edge.name}-gate-1"], capture_output=True, timeout=60
        )


def test_another_project_with_the_same_edge_name_cannot_take_this_edge_for_its_own(edge, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(edge.root / "profiles", other / "profiles")
    # the same `name:`, so the same compose project
    shutil.copy(edge.root / "edge.yaml", other / "edge.yaml")
    assert run_cli("--root", str(other), "render").returncode == 0
    for args in (["edge", "status"], ["edge", "up"], ["edge", "down"], ["status"]):
        res = run_cli("--root", str(other), *args, timeout=120)
        assert res.returncode == 1, (args, res.stdout, res.stderr)
        assert (
            f"composegen-{edge.name} runs for another project ({edge.root}/out/edge/compose.yaml)"
            in res.stderr
        )
    assert "proxy running" in edge.ok("edge", "status")  # untouched
