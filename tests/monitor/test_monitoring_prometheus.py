"""Debian's real Prometheus, started on 127.0.0.1 with the rendered scrape configuration (its target moved to
an emulated engine running as a local process), scrapes the engine; series are read back through its HTTP
API, and the dashboard's queries answer."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import urllib.parse
import urllib.request

import httpx
import pytest
import yaml

from tests.emulator.test_emulator_metrics import TINY_ENV, chat
from tests.monitor.test_monitoring_render import (  # noqa: F401  (fixture)
    dashboard_queries,
    need,
    rendered,
)
from tests.support.emulator_proc import RECORDED_FLAGS, EmulatorProc, free_port


def query(base: str, promql: str) -> list[dict]:
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(url, timeout=5) as resp:
        body = json.load(resp)
    assert body["status"] == "success", body
    return body["data"]["result"]


def wait_for(check, timeout: float = 60.0):
    """Poll until check() returns something truthy (Prometheus scrapes every second here)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.25)
    pytest.fail(f"not within {timeout} s: {check.__doc__}")


@pytest.fixture
def prometheus(tmp_path, rendered):  # noqa: F811
    binary = need("prometheus")
    with EmulatorProc.start(tmp_path, serve_args=RECORDED_FLAGS, env=TINY_ENV) as emu:
        config = yaml.safe_load((rendered / "prometheus.yml").read_text())
        config["scrape_configs"][0]["static_configs"][0]["targets"] = [f"127.0.0.1:{emu.port}"]
        path = tmp_path / "prometheus.yml"
        path.write_text(yaml.safe_dump(config))
        port = free_port()
        log = open(tmp_path / "prometheus.log", "wb")  # noqa: SIM115  (closed below)
        proc = subprocess.Popen(
            [
                binary,
                f"--config.file={path}",
                f"--storage.tsdb.path={tmp_path / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            yield emu, f"http://127.0.0.1:{port}"
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
            log.close()


def test_prometheus_scrapes_the_emulated_engine(prometheus, rendered):  # noqa: F811
    emu, base = prometheus

    def up() -> list[dict]:
        """the vllm job's target is up"""
        try:
            return [r for r in query(base, 'up{job="vllm"}') if r["value"][1] == "1"]
        except OSError:
            return []

    wait_for(up)
    replies = [chat(emu.base_url, 8) for _ in range(3)]
    prompt = sum(r["usage"]["prompt_tokens"] for r in replies)

    def counted() -> list[dict]:
        """vllm:prompt_tokens_total reached the tokens sent"""
        return [
            r for r in query(base, "vllm:prompt_tokens_total") if float(r["value"][1]) >= prompt
        ]

    series = wait_for(counted)[0]["metric"]
    # the rendered labels and the engine's own
    assert (
        series["job"] == "vllm"
        and series["profile"] == "monitored"
        and series["served_name"] == "tiny"
    )
    assert series["model_name"] == "tiny" and series["engine"] == "0"
    # the dashboard's queries answer against real data (Grafana's variables filled in)
    for title, exprs in dashboard_queries(rendered / "grafana-dashboard.json").items():
        for expr in exprs:
            result = query(
                base, expr.replace("$__rate_interval", "1m").replace("$model_name", "tiny")
            )
            if title in ("Requests running and waiting", "KV cache usage", "Token throughput"):
                assert result, (title, expr)
    ttft = query(
        base,
        'histogram_quantile(0.5, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket{model_name="tiny"}[1m])))',
    )
    assert ttft and float(ttft[0]["value"][1]) > 0
    assert httpx.get(f"{base}/api/v1/targets").json()["data"]["activeTargets"][0]["health"] == "up"
