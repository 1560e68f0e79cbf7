"""The standby memory plan and the emulated GPUs' ledger on the real engine (issue 37 items 2 and 7): two
standby stacks at 0.60 of one GPU each, as the H200 recording ran them, fit only with one asleep. The plan
refuses `up --standby` beside the awake one (exit 2, the figures); started the other way round one serves
and one sleeps, the standby switch passes the plan, and the emulated engine itself refuses what does not
fit as vLLM does (a wake beside an awake engine; a start, when no plan stands in the way)."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from tests.edge.test_switch_engine import decide
from tests.support.edge import edge_project, serving

pytestmark = pytest.mark.docker
EMU = {"EMU_WEIGHTS_GIB": "6.5"}
WAKE = (
    "import urllib.request, urllib.error\n"
    "req = urllib.request.Request('http://127.0.0.1:8000/wake_up', data=b'{}', method='POST')\n"
    "try:\n    print(urllib.request.urlopen(req, timeout=60).status)\n"
    "except urllib.error.HTTPError as e:\n    print(e.code)\n"
)


def _logs(profile: str) -> str:
    res = subprocess.run(["docker", "logs", f"composegen-{profile}-vllm-1"], capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    return res.stdout + res.stderr


def _logged(profile: str, text: str) -> bool:
    """TEXT in the container's log within 10 s (the engine's log driver may lag its HTTP answer)."""
    deadline = time.monotonic() + 10
    while text not in _logs(profile):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def test_the_pair_fits_only_with_one_asleep(tmp_path, edge_img):
    project = edge_project(tmp_path, edge_img, standby=True, both_env=EMU, share=0.6)
    with serving(project) as edge:  # the old stack serves the alias, awake
        refused = edge.cli("up", edge.new, "--emulate", "--standby")
        assert refused.returncode == 2, refused.stderr
        assert f"{edge.new} cannot start beside the edge's running stacks: GPU 0: {edge.new} 57.01 GiB " \
               f"(starting: 0.6 x 95.01 GiB) + {edge.old} 57.01 GiB (awake: 0.6 x 95.01 GiB) = 114.02 GiB " \
               "> 95.01 GiB" in refused.stderr, refused.stderr  # fmt: skip

        # the order that fits: the candidate asleep first, then the alias's stack beside its residue
        edge.ok("down", edge.old)
        up = json.loads(edge.ok("up", edge.new, "--emulate", "--standby", "--json", timeout=600))
        assert up["asleep"]["gpu_gib_held"] == 0.87
        edge.ok("up", edge.old, "--emulate", timeout=600)
        assert "Free memory on device (94.14/95.01 GiB) on startup" in _logs(edge.old)
        report = json.loads(edge.ok("status", "--json"))
        sleeping = {s["profile"]: s["endpoint"]["sleeping"] for s in report["stacks"]}
        assert sleeping[edge.old] is None and sleeping[edge.new]["level"] == 1, sleeping

        # the emulated engine refuses a wake that does not fit beside the awake one, as vLLM's allocator
        woken = subprocess.run(["docker", "exec", f"composegen-{edge.new}-vllm-1", "python3", "-c", WAKE],
                               capture_output=True, text=True, timeout=120)  # fmt: skip
        assert woken.stdout.strip() == "500", woken
        assert "CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62" in _logs(
            edge.new
        )

        # the standby switch passes the plan (the new one awake beside the old one's residue) and goes by sleep
        decide(edge, "c1", edge.new)
        switched = json.loads(edge.ok("promote", edge.new, "--alias", "ds4-flash", "--campaign", "c1",
                                      "--emulate", "--json"))  # fmt: skip
        assert switched["path"] == "standby", switched

        # the sleep-cycle record: GPU memory (the EMULATED ledger) and host memory after every step
        res = edge.cli("qualify", edge.new, "--sleep-cycles", "2", "--json", timeout=600)
        # (the tiny profile fails its tool gates: not judged here)
        record = json.loads(res.stdout)["sleep"]
        assert record["gpu_source"] == "EMULATED ledger", record
        # 0.6 x 95.01 awake (57.008 in the ledger) + the other's 0.87 residue
        awake = {"0": 57.878}
        assert record["gpu_gib_before"] == awake, record
        for c in record["cycles"]:
            assert c["gpu_gib_after_sleep"] == {"0": 1.74}, c  # both asleep: 2 x 0.87
            assert c["gpu_gib_after_wake"] == awake, c
            assert c["host_available_gib_after_sleep"] > 0, c
            assert c["host_available_gib_after_wake"] > 0, c
        assert record["host_source"] == "/proc/meminfo of the engine's host", record
        assert record["passed"], record


def test_the_emulated_engine_refuses_a_start_beside_an_awake_one_as_vllm(tmp_path, edge_img):
    # no standby: no plan stands in the way; the emulated engine's own startup check does
    project = edge_project(tmp_path, edge_img, both_env=EMU, share=0.6)
    with serving(project) as edge:
        res = edge.cli("up", edge.new, "--emulate", timeout=600)
        assert res.returncode == 3, res.stderr
        assert (
            "ValueError: Free memory on device cuda:0 (38.0/95.01 GiB) on startup is less than desired GPU "
            "memory utilization (0.6, 57.01 GiB). Decrease GPU memory utilization or reduce GPU memory "
            "used by other processes." in _logs(edge.new) + res.stdout + res.stderr
        )


def test_a_level_1_sleep_whose_weights_do_not_fit_in_host_memory_is_refused(tmp_path, edge_img):
    # an emulated host of 12 GiB: 6.5 GiB of weights do not fit beside the guard's 8 GiB floor
    project = edge_project(tmp_path, edge_img, standby=True, share=0.45,
                           both_env={**EMU, "EMU_HOST_MEM_GIB": "12"})  # fmt: skip
    with serving(project) as edge:
        res = edge.cli("up", edge.new, "--emulate", "--standby", timeout=600)
        assert res.returncode == 2, res.stderr
        assert (
            f"{edge.new} cannot sleep at level 1: host memory: {edge.new}'s level-1 sleep keeps its weights "
            "in host memory, 6.50 GiB x 1 rank(s) = 6.50 GiB; MemAvailable 12.00 GiB - the guard's floor "
            "8.00 GiB leaves 4.00 GiB" in res.stderr
        ), res.stderr
        report = json.loads(edge.ok("status", "--json"))
        sleeping = {s["profile"]: s["endpoint"]["sleeping"] for s in report["stacks"]}
        assert sleeping[edge.new] is None  # left awake, not asleep on memory it does not have
