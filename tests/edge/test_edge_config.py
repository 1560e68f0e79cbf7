"""edge.yaml validation (file:line errors), deterministic out/edge/ covered by `render --check`, files that
the real tools accept (`docker compose config -q`, `caddy validate`), the gatekeeper's key matching."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from datetime import UTC, datetime, timedelta

import pytest

from composegen.edge import gatekeeper
from tests.support.cli import run_cli
from tests.support.engine import _SINGLE_REST, tiny_profile
from tests.support.helpers import make_project

PIN = "example/caddy@sha256:" + "e" * 64


def project(tmp, edge_text: str):
    profiles = {
        name: tiny_profile(
            f"{name}-served", f"{{host: {port}}}", rest=_SINGLE_REST.format(load=1, extra_env="")
        )
        for name, port in (("old", 39601), ("new", 39602))
    }
    root = make_project(tmp, profiles)
    (root / "edge.yaml").write_text(edge_text, encoding="utf-8")
    return root


GOOD = f"""\
listen: {{bind: 127.0.0.1, port: 39600}}
stacks: [old, new]
aliases: {{ds4-flash: old}}
images: {{proxy: "{PIN}", gate: "{PIN}"}}
"""
PUBLIC = GOOD.replace("127.0.0.1", "0.0.0.0")
ACME = "tls: {mode: acme, names: [llm.example.org, api.example.org], email: ops@example.org}\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (GOOD + "tls: {mode: off}\n".replace("off", "offf"), "edge.yaml:5: tls.mode: Input should be"),
        (GOOD.replace("127.0.0.1", "0.0.0.0") + "tls: {mode: off}\n", "edge.yaml:5: tls.mode: off is only allowed"),
        (GOOD + "colour: blue\n", "edge.yaml:5: colour: unknown key"),
        (GOOD.replace(PIN, "caddy:latest", 1), "edge.yaml:4: images.proxy: 'caddy:latest' is not pinned"),
        (GOOD.replace(PIN, "composegen/edge:latest", 1), "edge.yaml:4: images.proxy: 'composegen/edge:latest' is not"),
        (GOOD.replace("ds4-flash: old", "ds4-flash: other"), "edge.yaml:3: aliases.ds4-flash: 'other' is not one of"),
        (GOOD.replace("[old, new]", "[old, gone]"), "edge.yaml:2: stacks[1]: no profile 'gone'"),
        (GOOD.replace("port: 39600", "port: 39601"), "edge.yaml:2: stacks[0]: old's host port 39601 is also"),
        (GOOD + "tls: {mode: acme, names: [127.0.0.1]}\n", "edge.yaml:5: tls.names: acme needs public DNS names"),
        (PUBLIC + "tls: {mode: acme}\n", "edge.yaml:5: tls.names: acme needs public DNS names, got 'localhost'"),
        (PUBLIC + "tls: {mode: acme, names: [llm.example.org]}\n", "edge.yaml:5: tls.email: acme needs the account"),
        (PUBLIC + "tls:\n  mode: acme\n  names: [llm.example.org]\n  email: ops\n", "edge.yaml:8: tls.email: 'ops' is"),
        (GOOD + ACME, "edge.yaml:1: listen.bind: 127.0.0.1 is loopback; the ACME CA must reach"),
        ("stacks: [old, new]\nstacks: [old]\n", "edge.yaml:2: stacks: duplicate key"),
        (GOOD.replace("127.0.0.1", "localhost"), "edge.yaml:1: listen.bind: 'localhost' is not an IP address"),
        (GOOD.replace("127.0.0.1", "x.localhost"), "edge.yaml:1: listen.bind: 'x.localhost' is not an IP address"),
        (GOOD.replace("127.0.0.1", "'127.0.0.1 '"), "edge.yaml:1: listen.bind: '127.0.0.1 ' is not an IP address"),
    ],
)  # fmt: skip
def test_bad_edge_yaml_is_one_line_naming_file_line_and_field(tmp_path, text, message):
    root = project(tmp_path, text)
    res = run_cli("--root", str(root), "render")
    assert res.returncode == 2, res.stderr
    assert message in res.stderr and "Traceback" not in res.stderr
    assert not (root / "out").exists()  # bad input writes nothing


def test_a_stack_behind_the_edge_gets_no_open_kubernetes_service(tmp_path):
    root = project(tmp_path, GOOD)
    for args in (
        ["render", "--target", "k8s"],
        ["render", "--target", "all", "old"],
        ["render", "--target", "k8s", "--check"],
    ):
        res = run_cli("--root", str(root), *args)
        assert res.returncode == 2, (args, res.stderr)
        assert re.search(
            r"edge.yaml: (new, old|old) sits behind the edge: `--target k8s` cannot", res.stderr
        )
        assert not (root / "out").exists()
    (root / "edge.yaml").unlink()  # without the edge, the same profiles render for Kubernetes
    assert run_cli("--root", str(root), "render", "--target", "k8s").returncode == 0
    assert (root / "out/old/k8s/service.yaml").is_file()


def test_out_edge_is_deterministic_checked_and_accepted_by_the_real_tools(tmp_path):
    root = project(tmp_path, GOOD)
    assert run_cli("--root", str(root), "render").returncode == 0
    files = sorted(
        p.relative_to(root).as_posix() for p in (root / "out" / "edge").rglob("*") if p.is_file()
    )
    assert files == [
        "out/edge/Caddyfile", "out/edge/compose.yaml", "out/edge/door.Caddyfile", "out/edge/gatekeeper.py",
        "out/edge/stacks/new.yaml", "out/edge/stacks/old.yaml",
    ]  # fmt: skip
    first = {f: (root / f).read_bytes() for f in files}
    assert run_cli("--root", str(root), "render", "--check").returncode == 0
    (root / "out/edge/Caddyfile").write_text("# edited by hand\n")
    res = run_cli("--root", str(root), "render", "--check")
    assert res.returncode == 1 and "out/edge/Caddyfile" in res.stdout
    assert run_cli("--root", str(root), "render").returncode == 0
    assert {f: (root / f).read_bytes() for f in files} == first
    compose = (root / "out/edge/compose.yaml").read_text()
    assert PIN in compose and '"127.0.0.1:39600:8443"' in compose and "internal: true" in compose
    if shutil.which("docker"):
        check = subprocess.run(["docker", "compose", "-f", "out/edge/compose.yaml", "config", "-q"], cwd=root,
                               capture_output=True, text=True)  # fmt: skip
        assert check.returncode == 0, check.stderr
        both = ["-f", "out/old/compose.yaml", "-f", "out/edge/stacks/old.yaml"]
        merged = subprocess.run(["docker", "compose", *both, "config", "--format", "json"], cwd=root,
                                capture_output=True, text=True)  # fmt: skip
        assert merged.returncode == 0, merged.stderr
        import json

        vllm = json.loads(merged.stdout)["services"]["vllm"]
        assert not vllm.get("ports") and vllm["networks"]["edge"]["aliases"] == ["stack-old"]
    # the TLS listener is the only published port; the loopback listeners are the door's, in the host's network
    assert (
        compose.count("ports:") == 1
        and '"127.0.0.1:39600:8443"' in compose
        and 'network_mode: "host"' in compose
    )
    if shutil.which("caddy"):
        for caddyfile in ("out/edge/Caddyfile", "out/edge/door.Caddyfile"):
            valid = subprocess.run(["caddy", "validate", "--config", caddyfile, "--adapter", "caddyfile"],
                                   cwd=root, capture_output=True, text=True)  # fmt: skip
            assert valid.returncode == 0, valid.stderr[-2000:]
    (root / "edge.yaml").unlink()  # no edge any more: render removes what it generated
    res = run_cli("--root", str(root), "render")
    assert res.returncode == 0 and not (root / "out" / "edge").exists(), res.stdout


def test_the_gatekeeper_matches_hashes_and_honours_expiry_and_revocation():
    key = "cgk_example"
    digest = hashlib.sha256(key.encode()).hexdigest()
    now = datetime.now(UTC)
    later = (now + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    earlier = (now - timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    keys = {"clients": [{"name": "alice", "sha256": digest, "expires": later, "revoked": None}]}
    assert gatekeeper.client_for(keys, f"Bearer {key}", now) == "alice"
    assert gatekeeper.client_for(keys, f"Bearer {key}x", now) is None
    assert gatekeeper.client_for(keys, key, now) is None  # not a bearer header
    assert gatekeeper.client_for(keys, None, now) is None
    keys["clients"][0]["expires"] = earlier
    assert gatekeeper.client_for(keys, f"Bearer {key}", now) is None
    keys["clients"][0].update(expires=None, revoked=earlier)
    assert gatekeeper.client_for(keys, f"Bearer {key}", now) is None
    assert (
        gatekeeper.client_for({"clients": [None, {"sha256": digest}]}, f"Bearer {key}", now) is None
    )


def test_keys_are_printed_once_and_kept_only_as_hashes(tmp_path):
    root = project(tmp_path, GOOD)
    add = run_cli("--root", str(root), "edge", "keys", "add", "alice", "--expires", "2099-01-31")
    assert add.returncode == 0
    key = add.stdout.strip()
    listing = run_cli("--root", str(root), "edge", "keys", "list")
    assert (
        "alice" in listing.stdout
        and "2099-01-31T00:00:00Z" in listing.stdout
        and key not in listing.stdout
    )
    stored = (root / ".composegen/edge/keys.json").read_text()
    assert key not in stored and hashlib.sha256(key.encode()).hexdigest() in stored
    again = run_cli("--root", str(root), "edge", "keys", "add", "alice")
    assert again.returncode == 2 and "keys rotate alice" in again.stderr
    for argv, message in [
        (["edge", "keys", "add", "Bad Name"], "not a client name"),
        (["edge", "keys", "add", "carol", "--expires", "2001-01-01"], "already in the past"),
        (["edge", "keys", "add", "carol", "--expires", "soon"], "not a date"),
        (["edge", "keys", "revoke", "nobody"], "no client 'nobody'"),
    ]:
        res = run_cli("--root", str(root), *argv)
        assert res.returncode == 2 and message in res.stderr, res.stderr


def test_acme_is_rendered_as_an_issuer_the_real_caddy_accepts(tmp_path):
    """Rendered and validated only: no ACME CA is reachable here, so no certificate was ever obtained."""
    root = project(tmp_path, PUBLIC + ACME)
    assert run_cli("--root", str(root), "render").returncode == 0
    caddyfile = (root / "out/edge/Caddyfile").read_text()
    assert (
        "https://llm.example.org, https://api.example.org {" in caddyfile
        and "tls internal" not in caddyfile
    )
    assert '"0.0.0.0:39600:8443"' in (root / "out/edge/compose.yaml").read_text()
    if not shutil.which("caddy"):
        pytest.fail("no caddy: run `bash scripts/provision.sh` (provision.d/70-caddy.sh)")
    env = {**os.environ, "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data")}
    argv = ["--config", "out/edge/Caddyfile", "--adapter", "caddyfile"]
    adapted = subprocess.run(
        ["caddy", "adapt", *argv], cwd=root, env=env, capture_output=True, text=True
    )
    assert adapted.returncode == 0, adapted.stderr[-2000:]
    policies = json.loads(adapted.stdout)["apps"]["tls"]["automation"]["policies"]
    acme = [
        (p["subjects"], i)
        for p in policies
        for i in p.get("issuers", [])
        if i.get("module") == "acme"
    ]
    assert acme, policies
    subjects, issuer = acme[0]
    assert (
        sorted(subjects) == ["api.example.org", "llm.example.org"]
        and issuer["email"] == "ops@example.org"
    )
    # port 80 is not published: TLS-ALPN-01 only
    assert issuer["challenges"]["http"]["disabled"] is True
    valid = subprocess.run(
        ["caddy", "validate", *argv], cwd=root, env=env, capture_output=True, text=True
    )
    assert valid.returncode == 0, valid.stderr[-2000:]


def test_a_tampered_key_record_is_named_and_refused_never_an_internal_error(tmp_path):
    """keys.json edited by hand (issue 39): `keys list` lists every client, names each bad record, exits 2;
    the gatekeeper refuses a key whose expiry is not a time with a zone (never valid forever)."""
    root = project(tmp_path, GOOD)
    key = run_cli("--root", str(root), "edge", "keys", "add", "alice").stdout.strip()
    path = root / ".composegen/edge/keys.json"
    doc = json.loads(path.read_text())
    good = doc["clients"][0]
    tampered = {"naive": "2099-01-01T00:00:00", "garbage": "soon", "number": 4102444800}
    for name, expires in tampered.items():
        doc["clients"].append({**good, "name": name, "expires": expires})
    path.write_text(json.dumps(doc))
    for argv in (["edge", "keys", "list"], ["edge", "keys", "list", "--json"]):
        res = run_cli("--root", str(root), *argv)
        assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
        assert "alice" in res.stdout and all(name in res.stdout for name in tampered), res.stdout
        assert all(f"{name}: expires" in res.stderr for name in tampered), res.stderr
    now = datetime.now(UTC)
    for expires, allowed in [
        *((e, None) for e in tampered.values()),
        ("2099-01-01T00:00:00Z", "x"),
        (None, "x"),
    ]:
        keys = {
            "clients": [
                {"name": "x", "sha256": good["sha256"], "expires": expires, "revoked": None}
            ]
        }
        assert gatekeeper.client_for(keys, f"Bearer {key}", now) == allowed, expires
