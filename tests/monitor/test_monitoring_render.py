"""`monitoring: {prometheus: true}`: the Prometheus service in compose.yaml, prometheus.yml beside it (checked
by Debian's promtool), and the Grafana dashboard (valid JSON, the expected panels, every query valid PromQL)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
import yaml

from composegen import render
from composegen.profiles import resolve as profiles
from composegen.project import Project
from tests.conftest import DATA
from tests.support.cli import run_cli
from tests.support.helpers import REPO, make_project

MONITORED = (DATA / "monitoring" / "monitored.yaml").read_text()
PANELS = {
    "Requests running and waiting": ["vllm:num_requests_running", "vllm:num_requests_waiting"],
    "KV cache usage": ["vllm:kv_cache_usage_perc"],
    "Token throughput": ["vllm:prompt_tokens_total", "vllm:generation_tokens_total"],
    "Prefix cache hit rate": ["vllm:prefix_cache_hits_total"],
    "Time to first token": ["vllm:time_to_first_token_seconds_bucket"],
    "End-to-end request latency": ["vllm:e2e_request_latency_seconds_bucket"],
    "Preemptions": ["vllm:num_preemptions_total"],
    "Speculative decoding acceptance": ["vllm:spec_decode_num_accepted_tokens_total"],
}


def need(binary: str) -> str:
    """The path of a Debian tool the provisioning installs: missing is a skip locally, a failure in CI."""
    path = shutil.which(binary)
    if path is None:
        message = (
            f"{binary} not installed (scripts/provision-tests.sh installs Debian's prometheus)"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture
def rendered(tmp_path):
    root = make_project(tmp_path, {"monitored": MONITORED})
    res = run_cli("--root", str(root), "render")
    assert res.returncode == 0, res.stderr
    return root / "out" / "monitored"


def test_shipped_profiles_render_no_monitoring():
    for r in profiles.load_all(Project(REPO), None):
        assert r.profile.monitoring.prometheus is False
        assert render.monitoring_files(r) == {}
        assert "prometheus" not in render.render(r)


def test_prometheus_service_is_pinned_loopback_and_carries_the_rendered_config(rendered):
    assert sorted(p.name for p in rendered.iterdir()) == [
        "compose.yaml",
        "grafana-dashboard.json",
        "prometheus.yml",
    ]
    compose = yaml.safe_load((rendered / "compose.yaml").read_text())
    prom = compose["services"]["prometheus"]
    assert "@sha256:" in prom["image"] and len(prom["image"].split("@sha256:")[1]) == 64
    assert prom["ports"] == ["127.0.0.1:39097:9090"]  # never published beyond loopback
    assert prom["configs"] == [{"source": "prometheus", "target": "/etc/prometheus/prometheus.yml"}]
    # compose.yaml is self-contained (what `up` starts); the file beside it is the same text
    assert compose["configs"]["prometheus"]["content"] == (rendered / "prometheus.yml").read_text()
    config = yaml.safe_load((rendered / "prometheus.yml").read_text())
    assert config["global"]["scrape_interval"] == "1s"
    assert config["scrape_configs"][0]["static_configs"][0]["targets"] == ["vllm:8000"]
    compose_bin = shutil.which("docker")
    if compose_bin:
        res = subprocess.run(
            [compose_bin, "compose", "-f", str(rendered / "compose.yaml"), "config", "-q"],
            capture_output=True,
            text=True,
        )
        assert res.returncode == 0, res.stderr


def test_promtool_accepts_the_rendered_configuration(rendered):
    res = subprocess.run(
        [need("promtool"), "check", "config", str(rendered / "prometheus.yml")], capture_output=True
    )
    assert res.returncode == 0, res.stdout + res.stderr


def test_monitoring_is_part_of_the_profile_hash_and_render_check(tmp_path, rendered):
    root = rendered.parent.parent
    assert run_cli("--root", str(root), "render", "--check").returncode == 0
    (rendered / "prometheus.yml").write_text("tampered\n")
    res = run_cli("--root", str(root), "render", "--check")
    assert res.returncode == 1 and "out/monitored/prometheus.yml" in res.stdout + res.stderr
    plain = make_project(
        tmp_path / "plain", {"monitored": MONITORED.split("\nmonitoring:")[0] + "\n"}
    )
    off, on = (profiles.load(Project(p), "monitored") for p in (plain, root))
    assert off.hash != on.hash


def test_multi_node_runs_prometheus_on_the_head_only(tmp_path):
    text = (
        REPO / "profiles" / "dspark-2x.yaml"
    ).read_text() + "monitoring:\n  prometheus: true\n  port: 39098\n"
    root = make_project(tmp_path, {"dspark-2x": text})
    assert run_cli("--root", str(root), "render").returncode == 0
    head, worker = root / "out" / "dspark-2x" / "spark-1", root / "out" / "dspark-2x" / "spark-2"
    assert sorted(p.name for p in worker.iterdir()) == ["compose.yaml"]
    assert "prometheus" not in yaml.safe_load((worker / "compose.yaml").read_text())["services"]
    prom = yaml.safe_load((head / "compose.yaml").read_text())["services"]["prometheus"]
    assert (
        prom["network_mode"] == "host" and "--web.listen-address=127.0.0.1:39098" in prom["command"]
    )
    config = yaml.safe_load((head / "prometheus.yml").read_text())
    assert config["scrape_configs"][0]["static_configs"][0]["targets"] == ["127.0.0.1:8888"]
    res = subprocess.run(
        [need("promtool"), "check", "config", str(head / "prometheus.yml")], capture_output=True
    )
    assert res.returncode == 0, res.stdout + res.stderr


def dashboard_queries(path) -> dict[str, list[str]]:
    board = json.loads(path.read_text())
    return {panel["title"]: [t["expr"] for t in panel["targets"]] for panel in board["panels"]}


def test_dashboard_is_importable_json_with_the_expected_panels(rendered):
    board = json.loads((rendered / "grafana-dashboard.json").read_text())
    assert (
        board["__inputs"][0]["pluginId"] == "prometheus" and board["uid"] == "composegen-monitored"
    )
    assert board["templating"]["list"][0]["current"]["value"] == "tiny"
    queries = dashboard_queries(rendered / "grafana-dashboard.json")
    assert queries.keys() == PANELS.keys()
    for title, metrics in PANELS.items():
        for metric in metrics:
            assert any(metric in expr for expr in queries[title]), (title, metric)
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))


def test_every_dashboard_query_is_valid_promql(rendered, tmp_path):
    # promtool parses rule expressions: each query becomes a recording rule, Grafana's variables filled in.
    rules = [
        {
            "record": f"composegen:q{i}",
            "expr": expr.replace("$__rate_interval", "1m").replace("$model_name", "tiny"),
        }
        for i, expr in enumerate(
            e
            for exprs in dashboard_queries(rendered / "grafana-dashboard.json").values()
            for e in exprs
        )
    ]
    path = tmp_path / "rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    res = subprocess.run(
        [need("promtool"), "check", "rules", str(path)], capture_output=True, text=True
    )
    assert res.returncode == 0 and f"SUCCESS: {len(rules)} rules found" in res.stdout, (
        res.stdout + res.stderr
    )


def test_turning_monitoring_off_removes_its_files(rendered):
    root = rendered.parent.parent
    (root / "profiles" / "monitored.yaml").write_text(MONITORED.split("\nmonitoring:")[0] + "\n")
    check = run_cli("--root", str(root), "render", "--check")
    assert check.returncode == 1
    for name in ("prometheus.yml", "grafana-dashboard.json"):
        assert f"out/monitored/{name}" in check.stdout + check.stderr
    assert run_cli("--root", str(root), "render").returncode == 0
    assert sorted(p.name for p in rendered.iterdir()) == ["compose.yaml"]
    assert "prometheus" not in (rendered / "compose.yaml").read_text()
    assert run_cli("--root", str(root), "render", "--check").returncode == 0


def test_an_unpinned_prometheus_image_is_refused_in_one_line(tmp_path):
    text = MONITORED.replace(
        "  scrape_interval: 1s\n", "  scrape_interval: 1s\n  image: prom/prometheus:latest\n"
    )
    root = make_project(tmp_path, {"monitored": text})
    res = run_cli("--root", str(root), "render")
    assert res.returncode == 2 and not (root / "out").exists()
    assert res.stderr.strip() == (
        "profiles/monitored.yaml:21: monitoring.image: 'prom/prometheus:latest' is not pinned: "
        "write repo@sha256:<64 lowercase hex>"
    )
