"""`qualify` (and the campaign's qualification arm) on a stack behind the real Caddy: the exposure gate runs
as a criterion and its matrix goes into the evidence bundle; and no client key, once printed by `keys add`,
appears in any file of the project, any later output, container log or bundle."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support.campaigns import own_gpu_ids
from tests.support.edge import KEY_RE, EdgeProject, edge_project, serving
from tests.support.helpers import REPO

pytestmark = pytest.mark.docker
CHAT = {"model": "ds4-flash", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 4}
CLOSED = {
    ("/metrics", "GET"),
    ("/invocations", "POST"),
    ("/tokenize", "POST"),
    ("/scale_elastic_ep", "POST"),
}


@pytest.fixture(scope="module")
def edge(tmp_path_factory, edge_img) -> EdgeProject:
    with serving(
        edge_project(tmp_path_factory.mktemp("edge-qualify"), edge_img, gpu=own_gpu_ids(1)[0])
    ) as project:
        yield project


def exposure_criterion(verdict: dict) -> dict:
    found = [c for c in verdict["criteria"] if c["name"] == "exposure"]
    assert len(found) == 1, [c["name"] for c in verdict["criteria"]]
    return found[0]


def test_qualify_runs_the_exposure_gate_and_bundles_its_matrix(edge):
    res = edge.cli("qualify", edge.old, "--json", timeout=600)
    assert res.returncode in (0, 1), res.stderr  # 1: another criterion of the tiny profile may fail
    doc = json.loads(res.stdout)
    exposure = exposure_criterion(doc)
    assert exposure["passed"] and exposure["measured"] == exposure["threshold"] >= 14, exposure
    run = Path(doc["run"]) if Path(doc["run"]).is_absolute() else edge.root / doc["run"]
    matrix = json.loads((run / "exposure.json").read_text())
    rows = {(r["path"], r["method"]): r for r in matrix["rows"]}
    assert matrix["passed"] and set(rows) >= CLOSED
    assert all((rows[c]["without_key"], rows[c]["with_key"]) == (404, 404) for c in CLOSED)
    assert rows[("/v1/models", "GET")]["with_key"] == 200
    raw = {f["file"] for f in json.loads((run / "evidence.json").read_text())["raw"]}
    assert {"exposure.json", "qualify.json"} <= raw
    assert exposure_criterion(json.loads((run / "qualify.json").read_text()))["passed"]


def test_qualify_fails_its_exposure_criterion_when_the_edge_is_down(edge):
    edge.ok("edge", "down")
    try:
        res = edge.cli("qualify", edge.old, "--json", timeout=600)
        assert res.returncode == 1, res.stderr
        exposure = exposure_criterion(json.loads(res.stdout))
        assert not exposure["passed"] and exposure["reason"], exposure
    finally:
        edge.ok("edge", "up")


def test_no_key_in_any_file_output_log_or_bundle(edge):
    outputs = []
    keys = []
    for name in ("grep-a", "grep-b"):
        add = edge.cli("edge", "keys", "add", name)
        assert add.returncode == 0
        keys.append(add.stdout.strip())
        outputs.append(add.stderr)  # the notice: no key in it
    keys.append(edge.ok("edge", "keys", "rotate", "grep-b").strip())
    assert edge.request("POST", "/v1/chat/completions", keys[0], CHAT)[0] == 200
    assert edge.request("POST", "/v1/chat/completions", keys[2], CHAT)[0] == 200
    assert edge.request("GET", "/v1/models", keys[1])[0] == 401  # rotated away
    for argv in (["edge", "keys", "list"], ["edge", "keys", "list", "--json"], ["status"], ["status", "--json"],
                 ["edge", "status", "--json"], ["logs", edge.old], ["gate", edge.old, "--exposure", "--json"],
                 ["evidence", edge.old, "--exposure", "--json"], ["edge", "keys", "revoke", "grep-a"]):  # fmt: skip
        res = edge.cli(*argv, timeout=600)
        assert res.returncode == 0, (argv, res.stderr)
        outputs += [res.stdout, res.stderr]
    for container in (
        f"composegen-{edge.name}-gate-1",
        f"composegen-{edge.name}-proxy-1",
        f"composegen-{edge.old}-vllm-1",
    ):
        logs = subprocess.run(
            ["docker", "logs", container], capture_output=True, text=True, timeout=60
        )
        outputs += [logs.stdout, logs.stderr]
    # the log names the client
    assert 'client=grep-a "POST /v1/chat/completions" 200' in "".join(outputs)
    text = "".join(outputs).encode()
    files = [p for p in edge.root.rglob("*") if p.is_file() and not p.is_symlink()]
    assert any(p.name == "exposure.json" for p in files)  # the bundles are among them
    for key in keys:
        assert key.encode() not in text
        for path in files:
            assert key.encode() not in path.read_bytes(), f"{path} holds a key"
    # nor any other key (the exposure gate's throw-away one included)
    assert not KEY_RE.search(text)
    for path in files:
        assert not KEY_RE.search(path.read_bytes()), f"{path} holds a key"


def test_no_key_in_any_file_under_git():
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout
    hits = [name for name in tracked.decode().split("\0") if name and (REPO / name).is_file()
            and KEY_RE.search((REPO / name).read_bytes())]  # fmt: skip
    assert hits == []


def test_campaign_qualify_keeps_the_matrix_in_the_campaign(edge):
    """Last: the arm takes its stack down when it is done."""
    res = edge.cli(
        "campaign", "qualify", edge.old, "--emulate", "--name", "edge-arm", "--json", timeout=900
    )
    assert res.returncode in (0, 1), res.stderr
    directory = edge.root / "runs" / "campaigns" / "edge-arm"
    bundles = [p.parent for p in directory.rglob("exposure.json")]
    assert len(bundles) == 1, sorted(
        p.relative_to(directory).as_posix() for p in directory.rglob("*")
    )
    assert json.loads((bundles[0] / "exposure.json").read_text())["passed"]
    assert exposure_criterion(json.loads((bundles[0] / "qualify.json").read_text()))["passed"]
    record = (directory / "qualification.json").read_text()
    assert "exposure" in record
