"""Loopback is 127.0.0.0/8, ::1 and localhost in every spelling; everything else is another host."""

from __future__ import annotations

import pytest

from composegen.addresses import is_loopback, url_is_local


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "127.255.255.254", "::1", "[::1]", "localhost",
                                  "LOCALHOST", "0:0:0:0:0:0:0:1", "db.localhost"])  # fmt: skip
def test_loopback_spellings(host):
    assert is_loopback(host)


@pytest.mark.parametrize(
    "host", ["0.0.0.0", "::", "192.0.2.11", "128.0.0.1", "spark-2", "", None, "127.0.0.1.nip.io"]
)
def test_other_hosts(host):
    assert not is_loopback(host)


@pytest.mark.parametrize(
    "url, local",
    [(None, True), ("unix:///var/run/docker.sock", True), ("tcp://127.0.0.2:2375", True), ("tcp://[::1]:2375", True),
     ("tcp://192.0.2.11:2376", False), ("ssh://spark-2", False), ("ssh://127.0.0.1", False)],
)  # fmt: skip
def test_engine_urls(url, local):
    assert url_is_local(url) is local


@pytest.mark.parametrize("bind, beyond", [("127.0.0.2", False), ("::1", False), ("0.0.0.0", True)])
def test_validate_calls_only_non_loopback_binds_reachable_beyond_this_host(tmp_path, bind, beyond):
    from tests.support.cli import run_cli
    from tests.support.helpers import MINIMAL, make_project

    text = MINIMAL.replace("port: {host: 39999}", f'port: {{host: 39999, bind: "{bind}"}}')
    root = make_project(tmp_path, {"p": text})
    res = run_cli("--root", str(root), "validate", "p")
    assert res.returncode == 0, res.stderr
    assert ("reachable beyond this host" in res.stdout + res.stderr) is beyond
