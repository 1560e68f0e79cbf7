"""The emulator's multi-node launch (--nnodes/--node-rank/--master-addr/--master-port/--headless), as local
processes: the head waits for its workers, a dead worker fails the head, a gone head fails its workers."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.emulator.conftest import READY
from tests.support.ports import free_port

TP2 = (
    "org/model",
    "--served-model-name",
    "m",
    "--max-model-len",
    "8192",
    "--tensor-parallel-size",
    "2",
)


def _node(rank: int, master: int, nnodes: int = 2) -> tuple[str, ...]:
    return (
        *TP2,
        "--nnodes",
        str(nnodes),
        "--node-rank",
        str(rank),
        "--master-addr",
        "127.0.0.1",
        "--master-port",
        str(master),
        *(("--headless",) if rank else ()),
    )


def _kv_line(log: str) -> str:
    return re.search(r"GPU KV cache size: .*", log).group(0)


def test_head_serves_only_after_every_rank_joined(start):
    master = free_port()
    head = start(*_node(0, master), ready=False)
    head.wait_for("waiting for 1 remote node(s)")
    time.sleep(0.8)  # well past the 0.3 s load: a single-node engine would be serving by now
    assert not head.port_open() and READY not in head.log
    worker = start(*_node(1, master), ready=False)
    head.wait_for(READY)
    worker.wait_for("Node rank 1 is ready")
    assert (
        "Node rank 1 joined from 127.0.0.1" in head.log
        and "All 2 nodes joined; world size 2" in head.log
    )
    assert "Joined the master at 127.0.0.1" in worker.log and "Worker_TP1" in worker.log
    with urllib.request.urlopen(head.url + "/v1/models", timeout=5) as resp:
        assert json.load(resp)["data"][0]["id"] == "m"
    assert not worker.port_open()  # headless: no API server
    single = start(*TP2)
    # TP spans the nodes; per-rank memory is unchanged
    assert _kv_line(head.log) == _kv_line(single.log)


def test_a_killed_worker_fails_the_head_like_vllm(start):
    master = free_port()
    head = start(*_node(0, master), ready=False)
    worker = start(*_node(1, master), ready=False)
    head.wait_for(READY)
    worker.stop(signal.SIGKILL)
    assert head.proc.wait(timeout=20) == 1
    head.wait_for("Engine core proc EngineCore_DP0 died unexpectedly")
    assert re.search(
        r"Worker proc Worker_TP1 on node rank 1 \(127\.0\.0\.1:\d+\) died unexpectedly", head.log
    )
    assert "NCCL error: remote process exited" in head.log


def test_worker_started_first_waits_and_a_clean_head_stop_ends_it_cleanly(start):
    master = free_port()
    worker = start(*_node(1, master), ready=False)
    worker.wait_for("Waiting for the master at 127.0.0.1")
    head = start(*_node(0, master))
    worker.wait_for("Node rank 1 is ready")
    assert head.stop(signal.SIGTERM) == 0
    assert worker.proc.wait(timeout=20) == 0
    worker.wait_for("The head node shut down; exiting.")


def test_a_head_that_goes_away_fails_its_worker(start):
    master = free_port()
    head = start(*_node(0, master), ready=False)
    worker = start(*_node(1, master), ready=False)
    worker.wait_for("Node rank 1 is ready")
    head.stop(signal.SIGKILL)
    assert worker.proc.wait(timeout=20) == 1
    worker.wait_for("Lost the connection to the head node at 127.0.0.1")


def test_a_worker_of_another_shape_is_rejected_and_the_head_keeps_waiting(start):
    master = free_port()
    head = start(*_node(0, master), ready=False)
    head.wait_for("waiting for 1 remote node(s)")
    stranger = start("org/other-model", *_node(1, master)[1:], ready=False)
    assert stranger.proc.wait(timeout=20) == 1
    stranger.wait_for(
        "rejected node rank 1: configuration mismatch: the head serves org/model with world size 2, "
        "the node org/other-model with 2"
    )
    assert head.proc.poll() is None and not head.port_open()
    start(*_node(1, master), ready=False)  # the right worker still gets in
    head.wait_for(READY)


def test_master_port_in_use_and_join_timeout_fail_the_head(start):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        head = start(*_node(0, busy.getsockname()[1]), ready=False)
        assert head.proc.wait(timeout=20) == 1
    assert "DistNetworkError: The server socket has failed to listen" in head.log
    lonely = start(*_node(0, free_port()), ready=False, EMU_JOIN_TIMEOUT_S="1")
    assert lonely.proc.wait(timeout=20) == 1
    assert "Timed out after 1 seconds waiting for clients. 1/2 clients joined." in lonely.log


@pytest.mark.parametrize(
    "extra, message",
    [
        (
            ("--nnodes", "2", "--node-rank", "1"),
            "node rank 1 runs no API server: it needs --headless",
        ),
        (
            ("--nnodes", "2", "--node-rank", "0", "--headless"),
            "node rank 0 is the head; it cannot be --headless",
        ),
        (("--nnodes", "2", "--node-rank", "2", "--headless"), "--node-rank 2 must be in [0, 2)"),
        (
            ("--nnodes", "3", "--node-rank", "1", "--headless"),
            "world size 2 (tensor × pipeline parallel) does not split over 3 nodes",
        ),
    ],
)
def test_launch_combinations_vllm_refuses_are_usage_errors(extra, message):
    res = subprocess.run(
        [sys.executable, "-m", "composegen.emulator", "serve", *TP2, *extra],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2 and f"vllm serve: error: {message}" in res.stderr
