"""`bench NAME --via-edge` on the real engine, through the real Caddy and gatekeeper in front of an emulated
stack: both paths measured, the throw-away key's record gone from keys.json afterwards (also after Ctrl-C and
SIGTERM mid-run), no key in any output or file, and the figures in a bundle's HTML report, labelled EMULATED."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from composegen.edge.keys import keys_path
from composegen.project import Project
from tests.support.campaigns import own_gpu_ids
from tests.support.edge import KEY_RE, EdgeProject, edge_project, serving
from tests.support.helpers import REPO

pytestmark = pytest.mark.docker
SIZES = ("--input-tokens", "24", "--output-tokens", "8")


@pytest.fixture(scope="module")
def edge(tmp_path_factory, edge_img) -> EdgeProject:
    # 40 ms a token: at vLLM's emulated default (5 ms) a client starved for ~35 ms on this loaded
    # 2-core machine read a request's streamed tokens in one chunk (an inter-token latency of 0)
    slow = {"EMU_DECODE_TOK_S": "25"}
    tmp = tmp_path_factory.mktemp("edge-bench")
    with serving(edge_project(tmp, edge_img, gpu=own_gpu_ids(1)[0], both_env=slow)) as project:
        yield project


def clients(edge: EdgeProject) -> list[str]:
    path = keys_path(Project(edge.root))
    return [c["name"] for c in json.loads(path.read_text())["clients"]] if path.exists() else []


def no_key_anywhere(edge: EdgeProject, *outputs: str) -> None:
    for text in outputs:
        assert not KEY_RE.search(text.encode()), text[:400]
    files = [p for p in edge.root.rglob("*") if p.is_file() and not p.is_symlink()]
    assert any(p.suffix == ".yaml" for p in files), (
        files
    )  # the project's own files: never an empty loop
    for path in files:
        assert not KEY_RE.search(path.read_bytes()), path
    assert not KEY_RE.search(edge.gate_log().encode())


def test_both_paths_are_measured_and_the_key_is_gone(edge):
    res = edge.cli("bench", edge.old, "--via-edge", "--concurrency", "1,2", "--requests", "6",
                   *SIZES, "--json", timeout=600)  # fmt: skip
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    via = doc["via_edge"]
    assert doc["ok"] and doc["emulated"] is True and via["emulated"] is True
    assert via["url"] == edge.url and via["alias"] == "ds4-flash" == doc["model"]
    assert via["tls"] == "verified with the edge's internal CA"
    assert via["door_url"] == f"http://127.0.0.1:{edge.ports[edge.old]}"
    for lv in via["levels"]:
        for path in ("door", "edge"):
            assert (lv[path]["completed"], lv[path]["errors"]) == (6, 0), lv
            assert lv[path]["median_ttft_ms"] > 0 and lv[path]["median_itl_ms"] > 0
        assert lv["added_ttft_p50_ms"] == pytest.approx(
            lv["edge"]["median_ttft_ms"] - lv["door"]["median_ttft_ms"], abs=1e-3
        )
    assert [lv["completed"] for lv in doc["levels"]] == [6, 6]  # the edge's: what clients see
    # the gate let the throw-away client's requests through, by name
    assert (
        re.search(r"client=bench-via-edge-[0-9a-f]{8}", edge.gate_log())
        or "bench-via-edge" in edge.gate_log()
    )
    assert not [c for c in clients(edge) if c.startswith("bench-via-edge")]
    text = edge.ok("bench", edge.old, "--via-edge", "--concurrency", "1", "--requests", "2", *SIZES)
    assert "EMULATED vLLM: through the edge" in text and "added by the edge" in text
    assert not [c for c in clients(edge) if c.startswith("bench-via-edge")]
    no_key_anywhere(edge, res.stdout, res.stderr, text)


def test_the_figures_go_into_a_bundle_and_its_report(edge):
    res = edge.cli("evidence", edge.old, "--bench", "1", "--bench-requests", "3", "--bench-input-tokens", "24",
                   "--bench-output-tokens", "8", "--bench-via-edge", "--json", timeout=600)  # fmt: skip
    assert res.returncode == 0, res.stderr
    run = str(edge.root / json.loads(res.stdout)["path"])
    bench = json.loads((Path(run) / "bench.json").read_text())
    assert bench["via_edge"]["levels"][0]["edge"]["completed"] == 3
    page = edge.root / "report.html"
    edge.ok("report", run, "--html", str(page))
    html = page.read_text()
    assert "through the edge and the operator door" in html and "added by the edge" in html
    assert '<p class="emulated">EMULATED vLLM: through the edge' in html
    markdown = edge.ok("report", run, "--markdown")
    assert "| 1 | added by the edge |" in markdown
    no_key_anywhere(edge, res.stdout, res.stderr, markdown)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_run_removes_its_key(edge, signum):
    proc = subprocess.Popen(
        [sys.executable, "-m", "composegen", "--root", str(edge.root), "bench", edge.old, "--via-edge",
         "--concurrency", "1", "--requests", "2000", *SIZES],
        cwd=REPO, env={**os.environ, "NO_COLOR": "1"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not [c for c in clients(edge) if c.startswith("bench-via-edge")]:
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.1)
        time.sleep(1.5)  # mid-run: prompts sized, requests going through the edge
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == (130 if signum == signal.SIGINT else 143), err
    assert not [c for c in clients(edge) if c.startswith("bench-via-edge")]
    no_key_anywhere(edge, out.decode(), err.decode())


def test_a_stack_no_alias_points_at_is_refused_with_exit_2(edge):
    res = edge.cli("bench", edge.new, "--via-edge", "--requests", "1", *SIZES)
    assert res.returncode == 2, res.stderr
    assert (
        f"no alias of the edge points at {edge.new} (aliases: ds4-flash -> {edge.old})"
        in res.stderr
    )
    assert not [c for c in clients(edge) if c.startswith("bench-via-edge")]
